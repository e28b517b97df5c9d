// The agent and agent-session part of Drupe's HTTP API (/api/agents, /api/sessions,
// /api/drivers), and small pure helpers the agent views share. Sessions chat through the same
// routes as conversations (their conversation id is `agent-session:<sessionId>`), so nothing
// here streams.
import { ApiError, type ApprovalDecision, type ConversationStatus, detailFromBody } from "./api";

export const SESSION_PREFIX = "agent-session:";

export interface Agent {
  id: string;
  name: string;
  driverType: string;
  modelId: string | null;
  instructions: string | null;
  workspace: string | null;
  tools: string[];
  mcpServers: string[];
  permissionMode: string;
  /** The owner's user id (null: made before identity or with auth off, an admin's). */
  ownerId?: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface NewAgent {
  name: string;
  driverType: string;
  modelId?: string;
  instructions?: string;
  workspace?: string;
  permissionMode?: string;
}

export interface SessionRuntime {
  busy: boolean;
  compacting: boolean;
  execution: string;
  connection: string;
  pendingFollowUps: string[];
  pendingApprovals: { approvalId: string; toolCallId: string }[];
  contextUsage: Record<string, unknown> | null;
  lastTerminal: string | null;
  commands: string[];
}

export interface AgentSession {
  id: string;
  agentId: string;
  title: string | null;
  conversationId: string;
  settings: Record<string, unknown>;
  status: ConversationStatus;
  createdAt: string;
  updatedAt: string;
  runtime: SessionRuntime;
  /** A task run created or used it (GET /api/sessions only). */
  fromTask?: boolean;
  /** Its conversation's last update (GET /api/sessions only). */
  lastActivityAt?: string;
}

export interface DriverList {
  items: { type: string; checksModels: boolean }[];
  permissionModes: string[];
}

async function request<T>(method: string, url: string, body?: unknown): Promise<T> {
  const res = await fetch(url, {
    method,
    headers: body === undefined ? undefined : { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw new ApiError(res.status, detailFromBody(await res.text(), res.status));
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

const enc = encodeURIComponent;

export const agentsApi = {
  drivers(): Promise<DriverList> {
    return request("GET", "/api/drivers");
  },
  listAgents(): Promise<{ items: Agent[] }> {
    return request("GET", "/api/agents");
  },
  createAgent(body: NewAgent): Promise<Agent> {
    return request("POST", "/api/agents", body);
  },
  deleteAgent(id: string): Promise<void> {
    return request("DELETE", `/api/agents/${enc(id)}`);
  },
  getAgent(id: string): Promise<Agent> {
    return request("GET", `/api/agents/${enc(id)}`);
  },
  listSessions(): Promise<{ items: AgentSession[] }> {
    return request("GET", "/api/sessions");
  },
  createSession(agentId: string, title?: string): Promise<AgentSession> {
    return request("POST", `/api/agents/${enc(agentId)}/sessions`, title ? { title } : {});
  },
  getSession(id: string): Promise<AgentSession> {
    return request("GET", `/api/sessions/${enc(id)}`);
  },
  deleteSession(id: string): Promise<void> {
    return request("DELETE", `/api/sessions/${enc(id)}`);
  },
  approve(
    sessionId: string,
    decisions: ApprovalDecision[],
  ): Promise<{ ok: boolean; results: { approvalId: string; ok: boolean }[] }> {
    return request("POST", `/api/sessions/${enc(sessionId)}/approvals`, { decisions });
  },
};

/** The session id of an `agent-session:<id>` conversation id, else null. */
export function sessionIdOf(conversationId: string | null | undefined): string | null {
  if (!conversationId || !conversationId.startsWith(SESSION_PREFIX)) return null;
  return conversationId.slice(SESSION_PREFIX.length) || null;
}

/** The badge of a session's compaction state. */
export function compactionLabel(runtime: SessionRuntime | null | undefined): {
  state: "compacting" | "idle";
  label: string;
} {
  return runtime?.compacting
    ? { state: "compacting", label: "compacting context…" }
    : { state: "idle", label: "context ok" };
}

/** "42% of context" from a driver's context usage (percentage, or totalTokens / maxTokens). */
export function contextUsageText(usage: Record<string, unknown> | null | undefined): string | null {
  if (!usage) return null;
  const pct = usage.percentage;
  if (typeof pct === "number" && Number.isFinite(pct)) return `${Math.round(pct)}% of context`;
  const total = usage.totalTokens;
  const max = usage.maxTokens;
  if (typeof total === "number" && typeof max === "number" && max > 0) {
    return `${Math.round((100 * total) / max)}% of context`;
  }
  if (typeof total === "number") return `${total} tokens in context`;
  return null;
}

/** Sessions grouped by agent id, oldest first (the server's order). */
/**
 * The sidebar's sessions by agent, most recently active first. Sessions a task run created or
 * used (`fromTask`) are left to the task's run list, unless one is the open conversation.
 */
export function sessionsByAgent(
  sessions: AgentSession[],
  activeConversationId: string | null = null,
): Map<string, AgentSession[]> {
  const shown = sessions
    .filter((s) => !s.fromTask || s.conversationId === activeConversationId)
    .sort((a, b) => lastActivity(b).localeCompare(lastActivity(a)));
  const out = new Map<string, AgentSession[]>();
  for (const s of shown) {
    const list = out.get(s.agentId);
    if (list) list.push(s);
    else out.set(s.agentId, [s]);
  }
  return out;
}

/** When a session was last active (ISO 8601, UTC: sorts as text). */
export function lastActivity(s: AgentSession): string {
  return s.lastActivityAt ?? s.updatedAt;
}
