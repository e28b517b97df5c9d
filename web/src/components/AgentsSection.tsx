// The sidebar's "Agents" section: agents with their sessions (live status badges from the
// shared status poll), a create form, and new / delete for agents and sessions. A session
// opens as the conversation `agent-session:<id>` (#/c/agent-session:<id>). Signed in, the
// owner of an agent (or an admin) shares it from here (the share dialog, kind "agent"); an agent
// shared with the user says "shared" and has no delete or share button.
import { useCallback, useEffect, useRef, useState } from "react";
import { type ConversationStatus, errorMessage, type ModelInfo } from "../api";
import {
  type Agent,
  type AgentSession,
  agentsApi,
  type DriverList,
  type NewAgent,
  lastActivity,
  sessionIdOf,
  sessionsByAgent,
} from "../agentsApi";
import { useAuth } from "../auth";
import { conversationHash } from "../route";
import { AgentForm } from "./AgentForm";
import { ShareDialog } from "./ShareDialog";
import { StatusBadge } from "./StatusBadge";
import "../agents.css";

export function AgentsSection({
  activeId,
  statuses,
  models,
  defaultModel,
  onNavigate,
}: {
  activeId: string | null;
  statuses: Record<string, ConversationStatus>;
  models: ModelInfo[];
  defaultModel: string;
  onNavigate: (conversationId: string | null) => void;
}) {
  const [agents, setAgents] = useState<Agent[]>([]);
  const [sessions, setSessions] = useState<AgentSession[]>([]);
  const [drivers, setDrivers] = useState<DriverList>({ items: [], permissionModes: [] });
  const [creating, setCreating] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [sharing, setSharing] = useState<Agent | null>(null);
  const closeShare = useCallback(() => setSharing(null), []);
  const auth = useAuth();
  const me = auth.kind === "signed-in" ? auth.user : null;
  /** Signed in: the owner or an admin manages an agent; others were shared it. */
  const owns = (agent: Agent) => me === null || me.role === "admin" || agent.ownerId === me.id;

  const reload = useCallback(async () => {
    try {
      const [a, s] = await Promise.all([agentsApi.listAgents(), agentsApi.listSessions()]);
      setAgents(a.items);
      setSessions(s.items);
      setError(null);
    } catch (e) {
      setError(errorMessage(e));
    }
  }, []);

  useEffect(() => {
    void reload();
    agentsApi
      .drivers()
      .then(setDrivers)
      .catch(() => undefined);
  }, [reload]);

  // A session opened by URL (another tab, the CLI) that this list does not know yet: the list
  // is reloaded once for it; still unknown (another member's session of an agent shared with
  // this user), it is fetched and shown under its agent while it is open.
  const [opened, setOpened] = useState<AgentSession | null>(null);
  const checked = useRef<string | null>(null);
  useEffect(() => {
    const sessionId = sessionIdOf(activeId);
    if (!sessionId || sessions.some((s) => s.conversationId === activeId) || checked.current === activeId) return;
    checked.current = activeId;
    void reload().then(() =>
      agentsApi
        .getSession(sessionId)
        .then(setOpened)
        .catch(() => setOpened(null)),
    );
  }, [activeId, sessions, reload]);

  const othersOpen = opened !== null && opened.conversationId === activeId && !sessions.some((s) => s.id === opened.id);
  const grouped = sessionsByAgent(othersOpen ? [...sessions, opened] : sessions, activeId);
  const ownSessionIds = new Set(sessions.map((s) => s.id));

  const onCreate = async (body: NewAgent): Promise<boolean> => {
    try {
      const agent = await agentsApi.createAgent(body);
      const session = await agentsApi.createSession(agent.id);
      setCreating(false);
      await reload();
      onNavigate(session.conversationId);
      return true;
    } catch (e) {
      setError(errorMessage(e));
      return false;
    }
  };

  const onNewSession = async (agentId: string) => {
    try {
      const session = await agentsApi.createSession(agentId);
      await reload();
      onNavigate(session.conversationId);
    } catch (e) {
      setError(errorMessage(e));
    }
  };

  const onDeleteAgent = async (agent: Agent) => {
    try {
      await agentsApi.deleteAgent(agent.id);
      if (grouped.get(agent.id)?.some((s) => s.conversationId === activeId)) onNavigate(null);
    } catch (e) {
      setError(errorMessage(e));
    }
    void reload();
  };

  const onDeleteSession = async (session: AgentSession) => {
    try {
      await agentsApi.deleteSession(session.id);
      if (session.conversationId === activeId) onNavigate(null);
    } catch (e) {
      setError(errorMessage(e));
    }
    void reload();
  };

  return (
    <section className="agents-section" data-testid="agents-section">
      <div className="agents-head">
        <span className="agents-title">Agents</span>
        <button
          type="button"
          className="ghost small"
          data-testid="new-agent"
          aria-expanded={creating}
          onClick={() => setCreating((c) => !c)}
        >
          {creating ? "Cancel" : "+ Agent"}
        </button>
      </div>
      {error && (
        <div className="notice error small" role="alert" data-testid="agents-error">
          {error}
        </div>
      )}
      {creating && (
        <AgentForm drivers={drivers} models={models} defaultModel={defaultModel} onCreate={onCreate} />
      )}
      <ul className="agent-list">
        {agents.map((agent) => (
          <AgentItem
            key={agent.id}
            agent={agent}
            sessions={grouped.get(agent.id) ?? []}
            statuses={statuses}
            activeId={activeId}
            owned={owns(agent)}
            onNewSession={onNewSession}
            onDelete={onDeleteAgent}
            onDeleteSession={onDeleteSession}
            deletable={ownSessionIds}
            onShare={me !== null && owns(agent) ? setSharing : undefined}
          />
        ))}
        {agents.length === 0 && !creating && <li className="muted small pad">No agents yet.</li>}
      </ul>
      {sharing && <ShareDialog kind="agent" id={sharing.id} title={sharing.name} onClose={closeShare} />}
    </section>
  );
}

function AgentItem({
  agent,
  sessions,
  statuses,
  activeId,
  owned,
  onNewSession,
  onDelete,
  onDeleteSession,
  deletable,
  onShare,
}: {
  agent: Agent;
  sessions: AgentSession[];
  statuses: Record<string, ConversationStatus>;
  activeId: string | null;
  owned: boolean;
  onNewSession: (agentId: string) => void;
  onDelete: (agent: Agent) => void;
  onDeleteSession: (session: AgentSession) => void;
  /** The user's own sessions (another member's, opened through a share, has no ✕). */
  deletable: Set<string>;
  onShare?: (agent: Agent) => void;
}) {
  const [confirming, setConfirming] = useState(false);
  return (
    <li className="agent-item" data-testid="agent-item" data-agent-id={agent.id} data-owned={String(owned)}>
      <div className="agent-row">
        <span className="agent-name" title={agent.instructions ?? undefined}>
          {agent.name}
        </span>
        {!owned && (
          <span className="role-badge" data-testid="agent-shared" title="Shared with you">
            shared
          </span>
        )}
        <span className="agent-meta muted small" title={agent.workspace ?? undefined}>
          {agent.driverType} · {agent.modelId ?? "no model"}
        </span>
        <span className="item-actions">
          {confirming ? (
            <>
              <button
                type="button"
                className="danger small"
                data-testid="confirm-delete-agent"
                onClick={() => {
                  setConfirming(false);
                  onDelete(agent);
                }}
              >
                Delete
              </button>
              <button type="button" className="ghost small" onClick={() => setConfirming(false)}>
                Cancel
              </button>
            </>
          ) : (
            <>
              <button
                type="button"
                className="ghost small"
                data-testid="new-session"
                title="New session"
                aria-label={`New session with ${agent.name}`}
                onClick={() => onNewSession(agent.id)}
              >
                +
              </button>
              {onShare && (
                <button
                  type="button"
                  className="ghost small"
                  data-testid="share-agent"
                  title="Share agent"
                  aria-label={`Share ${agent.name}`}
                  onClick={() => onShare(agent)}
                >
                  ⇪
                </button>
              )}
              {owned && (
                <button
                  type="button"
                  className="ghost small"
                  data-testid="delete-agent"
                  title="Delete agent"
                  aria-label={`Delete ${agent.name}`}
                  onClick={() => setConfirming(true)}
                >
                  ✕
                </button>
              )}
            </>
          )}
        </span>
      </div>
      <ul className="session-list">
        {sessions.map((s, i) => {
          const active = s.conversationId === activeId;
          const title = s.title || `Session ${i + 1}`;
          return (
            <li
              key={s.id}
              className={`session-item${active ? " active" : ""}`}
              data-testid="session-item"
              data-session-id={s.id}
              data-conversation-id={s.conversationId}
              data-active={active ? "true" : "false"}
            >
              <a href={conversationHash(s.conversationId)} className="conversation-link" title={title}>
                <span className="conversation-title">{title}</span>
                <time className="muted small session-date" dateTime={lastActivity(s)} data-testid="session-date">
                  {shortDate(lastActivity(s))}
                </time>
                <StatusBadge status={statuses[s.conversationId] ?? s.status} />
              </a>
              {deletable.has(s.id) && (
                <span className="item-actions">
                  <button
                    type="button"
                    className="ghost small"
                    data-testid="delete-session"
                    title="Delete session"
                    aria-label={`Delete ${title}`}
                    onClick={() => onDeleteSession(s)}
                  >
                    ✕
                  </button>
                </span>
              )}
            </li>
          );
        })}
      </ul>
    </li>
  );
}

/** "14:05" today, "3 Dec" this year, "3 Dec 2025" before. */
function shortDate(iso: string): string {
  const d = new Date(iso);
  const now = new Date();
  if (d.toDateString() === now.toDateString()) {
    return d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
  }
  const sameYear = d.getFullYear() === now.getFullYear();
  return d.toLocaleDateString(undefined, sameYear ? { day: "numeric", month: "short" } : { day: "numeric", month: "short", year: "numeric" });
}
