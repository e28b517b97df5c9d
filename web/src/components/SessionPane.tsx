// One agent session: the chat view of its conversation (`agent-session:<id>`), under a bar with
// the agent, the compaction status and the runtime state read from GET /api/sessions/{id}
// (polled: fast while the session is busy). Agent approvals are answered in place through
// POST /api/sessions/{id}/approvals; the Approve / Deny buttons are the chat view's own.
import { useCallback, useEffect, useState } from "react";
import { api, type ApprovalDecision, type ConversationDetail, errorMessage } from "../api";
import {
  type Agent,
  type AgentSession,
  agentsApi,
  compactionLabel,
  contextUsageText,
  type SessionRuntime,
} from "../agentsApi";
import { ChatView } from "./ChatView";
import "../agents.css";

const BUSY_POLL_MS = 800;
const IDLE_POLL_MS = 3000;

export function SessionPane({
  conversationId,
  sessionId,
  onActivity,
}: {
  conversationId: string;
  sessionId: string;
  onActivity: () => void;
}) {
  const [detail, setDetail] = useState<ConversationDetail | null>(null);
  const [session, setSession] = useState<AgentSession | null>(null);
  const [agent, setAgent] = useState<Agent | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    let cancelled = false;
    Promise.all([api.getConversation(conversationId), agentsApi.getSession(sessionId)])
      .then(async ([d, s]) => {
        if (cancelled) return;
        setSession(s);
        setAgent(await agentsApi.getAgent(s.agentId));
        if (!cancelled) setDetail(d);
      })
      .catch((e) => !cancelled && setError(errorMessage(e)));
    return () => {
      cancelled = true;
    };
  }, [conversationId, sessionId]);

  // Poll the runtime state (compaction, queue, approvals); faster while something runs.
  const busy = session?.runtime.busy ?? false;
  useEffect(() => {
    if (!session) return;
    let stopped = false;
    const timer = setTimeout(
      async () => {
        try {
          const next = await agentsApi.getSession(sessionId);
          if (!stopped) setSession(next);
        } catch {
          // a failed poll keeps the last state; the next one tries again
          if (!stopped) setSession((s) => (s ? { ...s } : s));
        }
      },
      busy ? BUSY_POLL_MS : IDLE_POLL_MS,
    );
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [session, sessionId, busy]);

  const approve = useCallback(
    async (decisions: ApprovalDecision[]) => {
      const result = await agentsApi.approve(sessionId, decisions);
      const refreshed = await agentsApi.getSession(sessionId).catch(() => null);
      if (refreshed) setSession(refreshed);
      if (!result.ok) throw new Error("the agent no longer waits for this approval");
      return result;
    },
    [sessionId],
  );

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
  if (!detail || !session || !agent) return <section className="chat loading" aria-busy="true" />;
  return (
    <div className="session-pane" data-testid="session-pane" data-session-id={sessionId}>
      <SessionBar agent={agent} runtime={session.runtime} />
      <ChatView
        detail={detail}
        models={[]}
        selectedModels={[]}
        onSelectModels={() => undefined}
        defaultModel={agent.modelId ?? ""}
        strategy="enqueue"
        onStrategy={() => undefined}
        onActivity={onActivity}
        approve={approve}
        pickers={false}
        canRegenerate={false}
      />
    </div>
  );
}

function SessionBar({ agent, runtime }: { agent: Agent; runtime: SessionRuntime }) {
  const compaction = compactionLabel(runtime);
  const usage = contextUsageText(runtime.contextUsage);
  const queued = runtime.pendingFollowUps.length;
  const approvals = runtime.pendingApprovals.length;
  return (
    <div className="session-bar" data-testid="session-bar">
      <span className="session-agent">{agent.name}</span>
      <span className="muted small" title={agent.workspace ?? undefined}>
        {agent.driverType} · {agent.modelId ?? "no model"}
      </span>
      <span className="spacer" />
      {approvals > 0 && (
        <span className="status-badge status-awaiting-approval" data-testid="pending-approvals">
          {approvals === 1 ? "1 tool call needs approval" : `${approvals} tool calls need approval`}
        </span>
      )}
      {queued > 0 && (
        <span className="status-badge" data-testid="queued-follow-ups">
          {queued} queued
        </span>
      )}
      {usage && <span className="muted small">{usage}</span>}
      <span
        className={`status-badge compaction-${compaction.state}`}
        data-testid="compaction-status"
        data-state={compaction.state}
      >
        {compaction.label}
      </span>
    </div>
  );
}
