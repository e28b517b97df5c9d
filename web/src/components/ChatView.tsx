// One conversation: useChat renders the live answer (submit, resume on reload, regenerate);
// the server's tree is re-read whenever a stream ends, because the server owns history.
// Steers and multi-model turns are posted outside useChat and followed via resume / events.
import { Chat, useChat } from "@ai-sdk/react";
import type { FileUIPart, UIMessage } from "ai";
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import {
  api,
  ApiError,
  type ApprovalDecision,
  newId,
  type ConversationDetail,
  errorMessage,
  isLiveStatus,
  type ModelInfo,
  type Strategy,
} from "../api";
import { setStatus, useStatuses } from "../statusStore";
import {
  arrangeForDisplay,
  branchSiblings,
  hasPendingAnswer,
  infoById,
  isPlaceholder,
  lastUserMessage,
  mergeLocalLive,
  type MessageInfo,
  messageText,
  toUIMessages,
  trailingAnswer,
  visibleMessages,
} from "../tree";
import { DrupeChatTransport } from "../transport";
import { useConversationEvents } from "../useConversationEvents";
import { useFocusedMessage } from "../useFocusedMessage";
import { Columns, columnsFromExecutions } from "./Columns";
import { Composer } from "./Composer";
import { type ApprovalHandlers, errorPartText } from "./MessageParts";
import { ExportLinks } from "./ExportLinks";
import { EmptyLine, MessageView, statusNote } from "./MessageView";
import { QueuedSteers, type Steer, unresolvedSteers } from "./Steers";
import { StatusBadge } from "./StatusBadge";

const RESUME_THROTTLE_MS = 1500;

export function ChatView({
  detail,
  models,
  selectedModels,
  onSelectModels,
  defaultModel,
  strategy,
  onStrategy,
  firstMessage,
  onActivity,
  approve,
  pickers,
  canRegenerate: regenerateAllowed = true,
  knownTitle,
}: {
  detail: ConversationDetail;
  models: ModelInfo[];
  selectedModels: string[];
  onSelectModels: (ids: string[]) => void;
  defaultModel: string;
  strategy: Strategy;
  onStrategy: (s: Strategy) => void;
  firstMessage?: string;
  onActivity: () => void;
  /** Where approval decisions go (default: POST /api/chat/{id}/approvals). */
  approve?: (decisions: ApprovalDecision[]) => Promise<unknown>;
  /** Show the model and strategy pickers (default true). */
  pickers?: boolean;
  /** Offer regenerate (default true; agent sessions take new messages only). */
  canRegenerate?: boolean;
  /** The title the conversation list knows (set by the server's titler after the first turn). */
  knownTitle?: string | null;
}) {
  const id = detail.id;
  const [info, setInfo] = useState<Map<string, MessageInfo>>(() => infoById(detail.messages));
  const infoRef = useRef(info);
  infoRef.current = info;
  const [title, setTitle] = useState(detail.title);
  const [error, setError] = useState<string | null>(null);
  const [steers, setSteers] = useState<Steer[]>([]);
  const [decided, setDecided] = useState<Map<string, boolean>>(new Map());
  const initialMessages = useMemo(
    () => toUIMessages(visibleMessages(detail.messages, detail.branchLeafId ?? null)),
    [detail],
  );
  // The whole tree and the branch chosen on the server (sibling navigation, edit, send).
  const [tree, setTree] = useState({ messages: detail.messages, leaf: detail.branchLeafId ?? null });

  const syncRef = useRef<() => Promise<void>>(async () => undefined);
  const onChatErrorRef = useRef<(e: Error) => void>(() => undefined);
  // Own the Chat object so its status can be read synchronously in callbacks.
  const [chatObject] = useState(() => {
    const holder: { chat?: Chat<UIMessage> } = {};
    // The transport reads the chat's own messages (to complete resumed tool calls).
    holder.chat = new Chat<UIMessage>({
      id,
      messages: initialMessages,
      transport: new DrupeChatTransport(() => holder.chat?.messages ?? []),
      onFinish: () => void syncRef.current(),
      onError: (e) => onChatErrorRef.current(e),
    });
    return holder.chat;
  });
  // Throttled re-renders: a fast model can send hundreds of deltas a second.
  const chat = useChat({ chat: chatObject, resume: !firstMessage, experimental_throttle: 40 });
  const { messages, setMessages, sendMessage, regenerate, resumeStream, stop } = chat;

  /** Always current (a render-time copy would be stale inside async callbacks). */
  const statusRef = useMemo(
    () => ({
      get current() {
        return chatObject.status;
      },
    }),
    [chatObject],
  );
  const localBusy = chat.status === "submitted" || chat.status === "streaming";

  const events = useConversationEvents(id);
  const polled = useStatuses();
  const serverStatus =
    (events.connected && events.status) || polled.statuses[id] || detail.status;
  const liveColumns = events.executions.length >= 2 ? columnsFromExecutions(events.executions) : [];
  const multiLive = liveColumns.length > 0;
  const busy =
    localBusy || isLiveStatus(serverStatus) || liveColumns.some((c) => c.live);

  useEffect(() => {
    if (events.status) setStatus(id, events.status);
  }, [id, events.status, events.statusTick]);

  // ---- resume (throttled, so a stale "streaming" status cannot cause a request storm)
  const lastResume = useRef(firstMessage ? 0 : Date.now());
  const resumeTimer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const multiLiveRef = useRef(multiLive);
  multiLiveRef.current = multiLive;
  const eventsConnectedRef = useRef(events.connected);
  eventsConnectedRef.current = events.connected;

  const resumeNow = useCallback(async () => {
    lastResume.current = Date.now();
    try {
      await resumeStream();
    } finally {
      void syncRef.current();
    }
  }, [resumeStream]);

  /**
   * Set when a resumed stream cannot be folded from scratch (a continuation that refers to a
   * tool call made before it, e.g. after an approval): stop resuming until the answer settles,
   * then the tree is re-read.
   */
  const resumeBlocked = useRef(false);

  const maybeResume = useCallback(() => {
    if (statusRef.current === "submitted" || statusRef.current === "streaming") return;
    if (resumeBlocked.current) return;
    if (multiLiveRef.current && eventsConnectedRef.current) return; // columns render it
    const wait = lastResume.current + RESUME_THROTTLE_MS - Date.now();
    clearTimeout(resumeTimer.current);
    if (wait > 0) {
      resumeTimer.current = setTimeout(() => maybeResume(), wait);
      return;
    }
    void resumeNow();
  }, [resumeNow]);

  useEffect(() => () => clearTimeout(resumeTimer.current), []);

  // ---- re-read the tree from the server (the source of truth) once nothing streams locally
  const syncSeq = useRef(0);
  const needsSync = useRef(false);
  const sync = useCallback(async () => {
    const seq = ++syncSeq.current;
    let d: ConversationDetail;
    try {
      d = await api.getConversation(id);
    } catch (e) {
      if (seq === syncSeq.current) setError(errorMessage(e));
      return;
    }
    if (seq !== syncSeq.current) return;
    setTitle(d.title);
    setStatus(id, d.status);
    onActivity();
    if (statusRef.current === "submitted" || statusRef.current === "streaming") {
      needsSync.current = true; // re-read once the local stream settles
      return;
    }
    needsSync.current = false;
    const visible = visibleMessages(d.messages, d.branchLeafId ?? null);
    setTree({ messages: d.messages, leaf: d.branchLeafId ?? null });
    const nextInfo = infoById(d.messages);
    setMessages(mergeLocalLive(toUIMessages(visible), chatObject.messages, infoRef.current));
    infoRef.current = nextInfo;
    setInfo(nextInfo);
    // A stream error the answer itself now shows (its data-error part) needs no banner too.
    const shown = visible.flatMap((m) =>
      m.parts.flatMap((p) => (p.type === "data-error" ? [errorPartText(p.data)] : [])),
    );
    setError((current) => (current && shown.some((t) => t.includes(current)) ? null : current));
    const users = visible.filter((m) => m.role === "user").map((m) => [m.id, messageText(m)] as const);
    setSteers((list) => unresolvedSteers(list, users));
    if (hasPendingAnswer(d.messages)) maybeResume();
    else if (!isLiveStatus(d.status)) events.clearExecutions();
  }, [id, onActivity, setMessages, maybeResume, events.clearExecutions, chatObject]);
  syncRef.current = sync;

  onChatErrorRef.current = (e: Error) => {
    if (/no tool (invocation|call)|tool call id/i.test(e.message)) {
      resumeBlocked.current = true;
      chatObject.clearError();
    } else {
      setError(errorMessage(e));
    }
    void sync();
  };

  useEffect(() => {
    if (!localBusy && needsSync.current) void sync();
  }, [localBusy, sync]);

  // ---- follow the server's status (other tabs, queued steers, approvals continuing)
  const prevServerStatus = useRef(serverStatus);
  useEffect(() => {
    const prev = prevServerStatus.current;
    prevServerStatus.current = serverStatus;
    if (!isLiveStatus(serverStatus)) resumeBlocked.current = false;
    if (isLiveStatus(serverStatus)) {
      maybeResume();
    } else if (isLiveStatus(prev) || serverStatus !== prev) {
      if (localBusy) needsSync.current = true;
      else void sync();
    }
    // statusTick: equal statuses from new events still re-check
  }, [serverStatus, events.statusTick, polled.tick, maybeResume, sync, localBusy]);

  // ---- first message of a conversation created from the home screen
  const firstSent = useRef(false);
  useEffect(() => {
    if (!firstMessage || firstSent.current) return;
    firstSent.current = true;
    void submit(firstMessage);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);

  const modelsForRequest = selectedModels.length ? selectedModels : undefined;
  /** The model of an answer streaming before the tree names it (a regenerate with a chosen one). */
  const [streamModel, setStreamModel] = useState<string | null>(null);

  async function submit(text: string, files: FileUIPart[] = []): Promise<boolean> {
    setError(null);
    setStreamModel(null);
    const parts: UIMessage["parts"] = [...files];
    if (text) parts.push({ type: "text", text });
    const userMessage: UIMessage = { id: newId(), role: "user", parts };
    if (busy) {
      // A steer: the server queues / interrupts / rejects / rolls back per the strategy.
      const key = newId();
      const knownUserIds = new Set(messages.filter((m) => m.role === "user").map((m) => m.id));
      setSteers((s) => [...s, { key, text, strategy, state: "sending", knownUserIds }]);
      try {
        await api.submitDetached({
          id,
          messages: [userMessage],
          trigger: "submit-message",
          strategy,
          models: modelsForRequest,
        });
        setSteers((s) => s.map((x) => (x.key === key ? { ...x, state: "queued" } : x)));
        if (strategy === "interrupt" || strategy === "rollback") void sync();
        return true;
      } catch (e) {
        setSteers((s) => s.filter((x) => x.key !== key));
        const busyError = e instanceof ApiError && e.status === 409;
        setError(busyError ? `Conversation is busy: ${errorMessage(e)}` : errorMessage(e));
        return false;
      }
    }
    if (selectedModels.length > 1) {
      // Multi-model: the answers are rendered as columns from the events endpoint.
      events.clearExecutions();
      setMessages([...messages, userMessage]);
      try {
        await api.submitDetached({
          id,
          messages: [userMessage],
          trigger: "submit-message",
          strategy,
          models: selectedModels,
        });
      } catch (e) {
        setError(errorMessage(e));
      }
      void sync();
      return true;
    }
    // On a chosen (older) branch the message continues it, not the newest message.
    const parentId = tree.leaf ?? undefined;
    await sendMessage(userMessage, { body: { models: modelsForRequest, strategy, parentId } });
    return true;
  }

  // ---- edit a user message and resend: a new user row beside it (same parent), a new branch.
  // The first message has no parent: its edit is a new root (`newRoot`), beside it all the same.
  async function editAndResend(originalId: string, text: string): Promise<boolean> {
    const original = info.get(originalId);
    if (!original || busy) return false;
    const parentId = original.parentId ?? undefined;
    setError(null);
    const userMessage: UIMessage = { id: newId(), role: "user", parts: [{ type: "text", text }] };
    try {
      await api.submitDetached({
        id,
        messages: [userMessage],
        trigger: "submit-message",
        strategy,
        models: modelsForRequest,
        ...(parentId ? { parentId } : { newRoot: true }),
      });
    } catch (e) {
      setError(errorMessage(e));
      return false;
    }
    void sync();
    return true;
  }

  /** A stored user message can be edited; the first one only where branches are allowed
   * (agent sessions keep one history: no regenerate, no second root). */
  const canEdit = (meta: MessageInfo | undefined) =>
    meta !== undefined && (meta.parentId != null || regenerateAllowed);

  // ---- ‹ 2/3 ›: show another sibling's branch (kept on the server), then re-read the tree
  async function pickBranch(messageId: string) {
    try {
      await api.setBranch(id, messageId);
    } catch (e) {
      setError(errorMessage(e));
      return;
    }
    await sync();
  }
  const treeById = useMemo(() => new Map(tree.messages.map((m) => [m.id, m])), [tree]);
  const branchOf = (messageId: string) => {
    const stored = treeById.get(messageId);
    if (!stored || busy) return undefined;
    const { ids, index } = branchSiblings(stored, tree.messages);
    if (ids.length < 2 || index < 0) return undefined;
    return { index, count: ids.length, onPick: (i: number) => void pickBranch(ids[i]) };
  };

  async function onStop() {
    try {
      await api.stop(id);
    } catch (e) {
      setError(errorMessage(e));
    }
    await stop();
    void sync();
  }

  /** Answer the last user message again: with `modelId` (the ▾ menu), else the picked models. */
  async function onRegenerate(modelId?: string) {
    setError(null);
    const trailing = trailingAnswer(messages, info);
    if (trailing.length === 0) return;
    const first = trailing[0];
    if (modelId) {
      setStreamModel(modelId);
      await regenerate({ messageId: first.id, body: { models: [modelId] } });
      return;
    }
    setStreamModel(null);
    if (selectedModels.length > 1) {
      const index = messages.findIndex((m) => m.id === first.id);
      const kept = messages.slice(0, index);
      const last = lastUserMessage(kept);
      events.clearExecutions();
      setMessages(kept);
      try {
        await api.submitDetached({
          id,
          messages: last ? [last] : [],
          trigger: "regenerate-message",
          messageId: first.id,
          models: selectedModels,
        });
      } catch (e) {
        setError(errorMessage(e));
      }
      void sync();
      return;
    }
    await regenerate({ messageId: first.id, body: { models: modelsForRequest } });
  }

  const onDecision = useCallback(
    async (approvalId: string, approved: boolean) => {
      setDecided((m) => new Map(m).set(approvalId, approved));
      try {
        const decisions = [{ approvalId, approved }];
        await (approve ? approve(decisions) : api.approve(id, decisions));
      } catch (e) {
        setDecided((m) => {
          const next = new Map(m);
          next.delete(approvalId);
          return next;
        });
        setError(errorMessage(e));
        return;
      }
      if (statusRef.current !== "submitted" && statusRef.current !== "streaming") {
        clearTimeout(resumeTimer.current);
        await resumeNow();
      }
    },
    [id, resumeNow, approve],
  );
  const approvals: ApprovalHandlers = useMemo(() => ({ decided, onDecision }), [decided, onDecision]);

  const items = arrangeForDisplay(messages, info, multiLive);
  const isStreaming = (m: UIMessage) =>
    localBusy && m.role === "assistant" && !isPlaceholder(m) && (!info.has(m.id) || info.get(m.id)?.status === "pending");
  const canRegenerate =
    regenerateAllowed &&
    !busy && serverStatus !== "awaiting-approval" && trailingAnswer(messages, info).length > 0;

  // ---- stick to the bottom while new content arrives, unless the user scrolled up
  const listRef = useRef<HTMLDivElement>(null);
  const stick = useRef(true);
  useEffect(() => {
    const el = listRef.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  });
  // ---- `#/c/<id>?m=<message>` (a search hit): scroll to that message and mark it
  const focusId = useFocusedMessage();
  const messageCount = messages.length;
  useEffect(() => {
    if (!focusId || messageCount === 0) return;
    const target = listRef.current?.querySelector(`[data-message-id="${CSS.escape(focusId)}"]`);
    if (!target) return;
    stick.current = false;
    target.scrollIntoView({ block: "center" });
    target.classList.add("found");
  }, [focusId, messageCount]);

  return (
    <section className="chat" data-conversation-id={id}>
      <header className="chat-head">
        <h1 className="chat-title">{knownTitle || title || "Untitled"}</h1>
        <StatusBadge status={serverStatus} />
        <ExportLinks conversationId={id} />
      </header>
      <div
        className="message-list"
        data-testid="message-list"
        ref={listRef}
        onScroll={(e) => {
          const el = e.currentTarget;
          stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
        }}
      >
        {messages.length === 0 && !multiLive && (
          <div className="empty-state" data-testid="empty-state">
            <EmptyLine />
          </div>
        )}
        {items.map((item) =>
          item.kind === "live-columns" ? (
            <Columns key="live-columns" live models={models} approvals={approvals} columns={liveColumns} />
          ) : item.kind === "group" ? (
            <Columns
              key={item.key}
              live={false}
              models={models}
              approvals={approvals}
              columns={item.messages.map((m) => ({
                key: m.id,
                modelId: info.get(m.id)?.modelId ?? null,
                status: info.get(m.id)?.status,
                message: m,
                live: isPlaceholder(m),
                note: statusNote(info.get(m.id)),
              }))}
            />
          ) : (
            <MessageView
              key={item.message.id}
              message={item.message}
              info={info.get(item.message.id) ?? (item.standInFor ? info.get(item.standInFor) : undefined)}
              fallbackModel={streamModel ?? selectedModels[0] ?? defaultModel}
              models={models}
              approvals={approvals}
              streaming={isStreaming(item.message)}
              branch={branchOf(item.message.id)}
              onEdit={
                item.message.role === "user" && !busy && canEdit(info.get(item.message.id))
                  ? (text) => editAndResend(item.message.id, text)
                  : undefined
              }
            />
          ),
        )}
        {chat.status === "submitted" && !multiLive && !messages.some(isPlaceholder) && (
          <div className="message assistant waiting">
            <span className="cursor" aria-label="waiting" />
          </div>
        )}
        <QueuedSteers steers={steers} />
      </div>
      {error && (
        <div className="notice error chat-error" role="alert" data-testid="chat-error">
          <span>{error}</span>
          <button type="button" className="ghost small" onClick={() => setError(null)} aria-label="Dismiss the error">
            ✕
          </button>
        </div>
      )}
      <Composer
        busy={busy}
        models={models}
        selectedModels={selectedModels}
        onSelectModels={onSelectModels}
        defaultModel={defaultModel}
        strategy={strategy}
        onStrategy={onStrategy}
        onSend={submit}
        attachments
        onStop={onStop}
        canRegenerate={canRegenerate}
        onRegenerate={onRegenerate}
        pickers={pickers}
      />
    </section>
  );
}
