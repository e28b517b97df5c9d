// Shell: hash routing (#/c/<id>), the conversation list, models and the user's pickers.
import { useCallback, useEffect, useRef, useState } from "react";
import {
  api,
  type ConversationDetail,
  type ConversationSummary,
  errorMessage,
  isLiveStatus,
  type ModelList,
  STRATEGIES,
  type Strategy,
} from "./api";
import { sessionIdOf } from "./agentsApi";
import { AgentsSection } from "./components/AgentsSection";
import { ChannelsPage } from "./components/ChannelsPage";
import { CHANNELS_HASH, isChannelsRoute } from "./channelsApi";
import { ChatView } from "./components/ChatView";
import { SessionPane } from "./components/SessionPane";
import { EmptyLine } from "./components/MessageView";
import { Composer } from "./components/Composer";
import { Sidebar } from "./components/Sidebar";
import { FirstRunNotice, firstRunSeen, markFirstRunSeen } from "./components/FirstRunNotice";
import { SchedulesPage } from "./components/SchedulesPage";
import { TracePanel } from "./components/TracePanel";
import { UsagePage } from "./components/UsagePage";
import { AdminPage } from "./components/AdminPage";
import { ShareDialog } from "./components/ShareDialog";
import { TokensPage } from "./components/TokensPage";
import { ChatAccountsPage } from "./components/ChatAccountsPage";
import { KeysPage } from "./components/KeysPage";
import { McpPage } from "./components/McpPage";
import { ProvidersPage } from "./components/ProvidersPage";
import { SettingsNav, type SettingsTab } from "./components/SettingsNav";
import { UserMenu } from "./components/UserMenu";
import { useAuth } from "./auth";
import { conversationHash, type Page, parsePage, parseRoute, SETTINGS_HASH, traceHash } from "./route";
import { setStatuses, useStatusPolling, useStatuses } from "./statusStore";

function useRoute(): [string | null, (id: string | null) => void] {
  const [id, setId] = useState(() => parseRoute(window.location.hash));
  useEffect(() => {
    const onHash = () => setId(parseRoute(window.location.hash));
    window.addEventListener("hashchange", onHash);
    return () => window.removeEventListener("hashchange", onHash);
  }, []);
  const go = useCallback((next: string | null) => {
    window.location.hash = conversationHash(next);
  }, []);
  return [id, go];
}

function usePage(): Page {
  const [page, setPage] = useState<Page>(() => parsePage(window.location.hash));
  useEffect(() => {
    const onHash = () => setPage(parsePage(window.location.hash));
    window.addEventListener("hashchange", onHash);
    return () => window.removeEventListener("hashchange", onHash);
  }, []);
  return page;
}

function usePersisted<T>(key: string, initial: T, valid: (v: unknown) => v is T) {
  const [value, setValue] = useState<T>(() => {
    try {
      const raw = localStorage.getItem(key);
      const parsed: unknown = raw == null ? undefined : JSON.parse(raw);
      return valid(parsed) ? parsed : initial;
    } catch {
      return initial;
    }
  });
  const set = useCallback(
    (v: T) => {
      setValue(v);
      try {
        localStorage.setItem(key, JSON.stringify(v));
      } catch {
        // storage unavailable: keep it in memory
      }
    },
    [key],
  );
  return [value, set] as const;
}

/** The default model may be a configured id the catalogue does not list: list it anyway. */
function withDefaultListed(list: ModelList): ModelList {
  if (!list.default || list.models.some((m) => m.id === list.default)) return list;
  const provider = list.default.split(":")[0] ?? "";
  const entry = { id: list.default, label: list.default, provider, available: true, note: null };
  return { ...list, models: [entry, ...list.models] };
}

const isStrategy = (v: unknown): v is Strategy => STRATEGIES.includes(v as Strategy);
const isStringList = (v: unknown): v is string[] =>
  Array.isArray(v) && v.every((x) => typeof x === "string");

function useChannelsRoute(): boolean {
  const [on, setOn] = useState(() => isChannelsRoute(window.location.hash));
  useEffect(() => {
    const onHash = () => setOn(isChannelsRoute(window.location.hash));
    window.addEventListener("hashchange", onHash);
    return () => window.removeEventListener("hashchange", onHash);
  }, []);
  return on;
}

export function App() {
  const [route, go] = useRoute();
  const channelsOpen = useChannelsRoute();
  const page = usePage();
  const settingsTab: SettingsTab | null = channelsOpen
    ? "channels"
    : page?.kind === "keys" ||
        page?.kind === "mcp" ||
        page?.kind === "providers" ||
        page?.kind === "tokens" ||
        page?.kind === "chat-accounts"
      ? page.kind
      : null;
  const [showFirstRun, setShowFirstRun] = useState(() => !firstRunSeen());
  const dismissFirstRun = useCallback(() => {
    markFirstRunSeen();
    setShowFirstRun(false);
  }, []);
  const [items, setItems] = useState<ConversationSummary[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [listError, setListError] = useState<string | null>(null);
  const [models, setModels] = useState<ModelList>({ models: [], default: "" });
  const [selected, setSelected] = usePersisted<string[]>("drupe.models", [], isStringList);
  const [strategy, setStrategy] = usePersisted<Strategy>("drupe.strategy", "enqueue", isStrategy);
  const [firstMessage, setFirstMessage] = useState<{ id: string; text: string } | null>(null);
  const signedIn = useAuth().kind === "signed-in";
  const [sharing, setSharing] = useState<{ id: string; title: string } | null>(null);
  const closeShare = useCallback(() => setSharing(null), []);

  // Under 768 px the sidebar is a panel over the page: the ☰ button opens it, following a link
  // (any hash change) or Escape closes it.
  const [navOpen, setNavOpen] = useState(false);
  useEffect(() => {
    const close = () => setNavOpen(false);
    const onKey = (e: KeyboardEvent) => e.key === "Escape" && close();
    window.addEventListener("hashchange", close);
    window.addEventListener("keydown", onKey);
    return () => {
      window.removeEventListener("hashchange", close);
      window.removeEventListener("keydown", onKey);
    };
  }, []);

  useStatusPolling();
  const polled = useStatuses();
  const pollOk = useRef(polled.ok);
  pollOk.current = polled.ok;

  const reloadList = useCallback(async () => {
    try {
      const page = await api.listConversations();
      setItems((old) => {
        // keep the pages loaded beyond the first one
        const fresh = new Set(page.items.map((i) => i.id));
        const lastFresh = page.items[page.items.length - 1]?.updatedAt;
        const tail = page.nextCursor && lastFresh ? old.filter((o) => !fresh.has(o.id) && o.updatedAt < lastFresh) : [];
        return [...page.items, ...tail];
      });
      setCursor((c) => (c === null ? page.nextCursor : c));
      setListError(null);
      // Without /api/status, the list's statuses feed the badges and the open conversation.
      if (!pollOk.current) setStatuses(Object.fromEntries(page.items.map((i) => [i.id, i.status])), false);
    } catch (e) {
      setListError(errorMessage(e));
    }
  }, []);

  const loadMore = useCallback(async () => {
    if (!cursor) return;
    try {
      const page = await api.listConversations(cursor);
      setItems((old) => [...old, ...page.items.filter((i) => !old.some((o) => o.id === i.id))]);
      setCursor(page.nextCursor);
    } catch (e) {
      setListError(errorMessage(e));
    }
  }, [cursor]);

  useEffect(() => {
    void reloadList();
    const loadModels = () =>
      api
        .models()
        .then((m) => setModels(withDefaultListed(m)))
        .catch(() => undefined);
    void loadModels();
    // The providers page changed what the server offers: no reload needed.
    window.addEventListener("drupe:models-changed", loadModels);
    return () => window.removeEventListener("drupe:models-changed", loadModels);
  }, [reloadList]);

  // Drop remembered models the server no longer offers.
  useEffect(() => {
    if (!models.models.length) return;
    const known = selected.filter((s) => models.models.some((m) => m.id === s && m.available));
    if (known.length !== selected.length) setSelected(known);
  }, [models, selected, setSelected]);

  // Reload the list when any conversation's status changes (new ones, finished ones): a turn's
  // start is also when the server titles a new conversation, so every tab shows the title. A
  // poll that misses a short live phase still sees "idle" become "done".
  // A title model renames a conversation after its first answer: `titled` counts those.
  const liveKey =
    Object.entries(polled.statuses)
      .map(([k, s]) => `${k}:${isLiveStatus(s) ? "live" : s}`)
      .sort()
      .join(",") + `|${polled.titled}`;
  const firstLive = useRef(true);
  useEffect(() => {
    if (firstLive.current) {
      firstLive.current = false;
      return;
    }
    void reloadList();
  }, [liveKey, reloadList]);

  // Fallback when /api/status is unavailable: re-read the list every 4 s.
  useEffect(() => {
    if (polled.ok) return;
    const timer = setInterval(() => void reloadList(), 4000);
    return () => clearInterval(timer);
  }, [polled.ok, reloadList]);

  const createConversation = useCallback(async (): Promise<string | null> => {
    try {
      const c = await api.createConversation();
      setItems((old) => [c, ...old.filter((o) => o.id !== c.id)]);
      return c.id;
    } catch (e) {
      setListError(errorMessage(e));
      return null;
    }
  }, []);

  const onNew = useCallback(async () => {
    const id = await createConversation();
    if (id) go(id);
  }, [createConversation, go]);

  const onRename = useCallback(
    async (id: string, title: string) => {
      setItems((old) => old.map((o) => (o.id === id ? { ...o, title } : o)));
      try {
        await api.renameConversation(id, title);
      } catch (e) {
        setListError(errorMessage(e));
      }
      void reloadList();
    },
    [reloadList],
  );

  const onDelete = useCallback(
    async (id: string) => {
      try {
        await api.deleteConversation(id);
        setItems((old) => old.filter((o) => o.id !== id));
        if (route === id) go(null);
      } catch (e) {
        setListError(errorMessage(e));
      }
    },
    [route, go],
  );

  const startFromHome = useCallback(
    async (text: string) => {
      dismissFirstRun(); // shown once, before the first answer
      const id = await createConversation();
      if (!id) return false;
      setFirstMessage({ id, text });
      go(id);
      return true;
    },
    [createConversation, go, dismissFirstRun],
  );

  const pickerProps = {
    models: models.models,
    selectedModels: selected,
    onSelectModels: setSelected,
    defaultModel: models.default,
    strategy,
    onStrategy: setStrategy,
  };

  return (
    <div className={`app${navOpen ? " nav-open" : ""}`}>
      <button
        type="button"
        className="nav-toggle"
        data-testid="nav-toggle"
        aria-label={navOpen ? "Hide conversations" : "Show conversations"}
        aria-expanded={navOpen}
        aria-controls="sidebar"
        onClick={() => setNavOpen((open) => !open)}
      >
        ☰
      </button>
      <div className="nav-scrim" aria-hidden="true" data-testid="nav-scrim" onClick={() => setNavOpen(false)} />
      <Sidebar
        items={items.filter((i) => sessionIdOf(i.id) === null)}
        statuses={polled.statuses}
        activeId={route}
        hasMore={cursor !== null}
        error={listError}
        onNew={onNew}
        onLoadMore={loadMore}
        onRename={onRename}
        onDelete={onDelete}
        onShare={signedIn ? (id, title) => setSharing({ id, title }) : undefined}
      >
        <nav className="side-links">
          <a href="#/schedules" data-testid="schedules-link" data-active={String(page?.kind === "schedules")}>
            Scheduled tasks
          </a>
          <a href={SETTINGS_HASH} data-testid="settings-link" data-active={String(settingsTab !== null)}>
            Settings
          </a>
        </nav>
        <AgentsSection
          activeId={route}
          statuses={polled.statuses}
          models={models.models}
          defaultModel={models.default}
          onNavigate={go}
        />
        <a
          href={CHANNELS_HASH}
          className={`sidebar-link${channelsOpen ? " active" : ""}`}
          data-testid="channels-link"
        >
          Channels
        </a>
        <UserMenu />
      </Sidebar>
      <main className="main">
        {route && !channelsOpen ? (
          <a className="trace-link" href={traceHash(route)} data-testid="trace-link">
            Trace
          </a>
        ) : null}
        {settingsTab !== null ? (
          <div className="settings-shell">
            <SettingsNav current={settingsTab} />
            {settingsTab === "channels" ? (
              <ChannelsPage />
            ) : settingsTab === "keys" ? (
              <KeysPage />
            ) : settingsTab === "mcp" ? (
              <McpPage />
            ) : settingsTab === "providers" ? (
              <ProvidersPage />
            ) : settingsTab === "chat-accounts" ? (
              <ChatAccountsPage />
            ) : (
              <TokensPage />
            )}
          </div>
        ) : page?.kind === "schedules" ? (
          <SchedulesPage />
        ) : page?.kind === "usage" ? (
          <UsagePage />
        ) : page?.kind === "admin" ? (
          <AdminPage />
        ) : page?.kind === "trace" ? (
          <TracePanel key={page.conversationId} conversationId={page.conversationId} />
        ) : route && sessionIdOf(route) ? (
          <SessionPane key={route} conversationId={route} sessionId={sessionIdOf(route) ?? ""} onActivity={reloadList} />
        ) : route ? (
          <ConversationPane
            key={route}
            id={route}
            firstMessage={firstMessage?.id === route ? firstMessage.text : undefined}
            knownTitle={items.find((i) => i.id === route)?.title}
            onActivity={reloadList}
            {...pickerProps}
          />
        ) : (
          <section className="chat home">
            <div className="message-list" data-testid="message-list">
              <div className="empty-state" data-testid="empty-state">
                <EmptyLine />
                {showFirstRun && (
                  <FirstRunNotice
                    models={models.models}
                    selectedModels={selected}
                    defaultModel={models.default}
                    onDismiss={dismissFirstRun}
                  />
                )}
                <p className="muted">Start typing below, or pick a conversation on the left.</p>
              </div>
            </div>
            <Composer busy={false} onSend={startFromHome} {...pickerProps} />
          </section>
        )}
      </main>
      {sharing && <ShareDialog kind="conversation" id={sharing.id} title={sharing.title} onClose={closeShare} />}
    </div>
  );
}

function ConversationPane({
  id,
  firstMessage,
  onActivity,
  ...rest
}: {
  id: string;
  firstMessage?: string;
  onActivity: () => void;
} & Omit<Parameters<typeof ChatView>[0], "detail" | "firstMessage" | "onActivity">) {
  const [detail, setDetail] = useState<ConversationDetail | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let cancelled = false;
    api
      .getConversation(id)
      .then((d) => !cancelled && setDetail(d))
      .catch((e) => !cancelled && setError(errorMessage(e)));
    return () => {
      cancelled = true;
    };
  }, [id]);
  if (error) {
    return (
      <section className="chat">
        <div className="empty-state">
          <div className="notice error" role="alert" data-testid="chat-error">
            {error}
          </div>
          <a href="#/">Back</a>
        </div>
      </section>
    );
  }
  if (!detail) return <section className="chat loading" aria-busy="true" />;
  return <ChatView detail={detail} firstMessage={firstMessage} onActivity={onActivity} {...rest} />;
}
