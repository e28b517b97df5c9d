// The only module that knows Drupe's HTTP API (same origin, JSON, errors are {"detail": "..."}).
// Components call these functions; they never build URLs themselves.
import type { UIMessage } from "ai";

export type ConversationStatus =
  | "idle"
  | "pending"
  | "streaming"
  | "done"
  | "aborted"
  | "awaiting-approval"
  | "error";

export type Strategy = "enqueue" | "interrupt" | "reject" | "rollback";
export const STRATEGIES: Strategy[] = ["enqueue", "interrupt", "reject", "rollback"];

export interface ConversationSummary {
  id: string;
  title: string | null;
  status: ConversationStatus;
  updatedAt: string;
  /** The owner's user id (null: an admin's, made before identity or with auth off). */
  ownerId?: string | null;
}

/** Where a conversation downloads as Markdown (the shown branch) or JSON (the whole tree). */
export function exportUrl(conversationId: string, format: "markdown" | "json"): string {
  return `/api/conversations/${encodeURIComponent(conversationId)}/export?format=${format}`;
}

/** One search hit: a title (`messageId` null) or a message; `snippet` marks the matches. */
export interface SearchHit {
  conversationId: string;
  title: string | null;
  messageId: string | null;
  role: UIMessage["role"] | null;
  snippet: { text: string; match: boolean }[];
  at: string;
}

export interface ConversationPage {
  items: ConversationSummary[];
  nextCursor: string | null;
}

export interface ServerMessage {
  id: string;
  parentId: string | null;
  role: UIMessage["role"];
  parts: UIMessage["parts"];
  status: "pending" | "success" | "paused" | "error";
  modelId: string | null;
  siblingsGroupId: string | number | null;
  createdAt: string;
  metadata: unknown;
}

export interface ConversationDetail {
  id: string;
  title: string | null;
  status: ConversationStatus;
  messages: ServerMessage[];
  /** The branch chosen on the server (PUT .../branch); null: the newest message's branch. */
  branchLeafId?: string | null;
}

export interface ModelInfo {
  id: string;
  label: string;
  provider: string;
  available: boolean;
  note: string | null;
}

export interface ModelList {
  models: ModelInfo[];
  default: string;
}

export interface ApprovalDecision {
  approvalId: string;
  approved: boolean;
  reason?: string;
}

/** An HTTP error carrying the server's `detail` text and the status code. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(detail);
    this.name = "ApiError";
  }
}

/** Turns a response body (`{"detail": ...}` or plain text) into a readable message. */
export function detailFromBody(body: string, status?: number): string {
  const fallback = status ? `HTTP ${status}` : "request failed";
  const text = body.trim();
  if (!text) return fallback;
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === "object" && "detail" in parsed) {
      const detail = (parsed as { detail: unknown }).detail;
      if (typeof detail === "string") return detail;
      // FastAPI validation errors: a list of {loc, msg}.
      if (Array.isArray(detail)) {
        return detail
          .map((d) => (d && typeof d === "object" && "msg" in d ? String(d.msg) : JSON.stringify(d)))
          .join("; ");
      }
      return JSON.stringify(detail);
    }
  } catch {
    // not JSON: use the text itself
  }
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

/** A readable message for any error thrown by fetch, the AI SDK transport or this module. */
export function errorMessage(err: unknown): string {
  if (err instanceof ApiError) return err.detail;
  if (err instanceof Error) return detailFromBody(err.message);
  return String(err);
}

/** One JSON request; a non-2xx answer throws ApiError with the server's detail. */
export async function request<T>(method: string, url: string, body?: unknown): Promise<T> {
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

export const api = {
  /** Show the branch through `messageId` (kept on the server; a new turn resets it). */
  setBranch(conversationId: string, messageId: string): Promise<{ leafId: string }> {
    return request("PUT", `/api/conversations/${encodeURIComponent(conversationId)}/branch`, { messageId });
  },
  /** Full-text search over titles and message text (every word, each as a prefix). */
  search(q: string, limit = 20): Promise<{ items: SearchHit[] }> {
    const params = new URLSearchParams({ q, limit: String(limit) });
    return request("GET", `/api/search?${params}`);
  },
  listConversations(before?: string | null, limit = 50): Promise<ConversationPage> {
    const q = new URLSearchParams({ limit: String(limit) });
    if (before) q.set("before", before);
    return request("GET", `/api/conversations?${q}`);
  },
  createConversation(title?: string, ephemeral?: boolean): Promise<ConversationSummary> {
    const body: Record<string, unknown> = {};
    if (title) body.title = title;
    if (ephemeral) body.ephemeral = true;
    return request("POST", "/api/conversations", body);
  },
  getConversation(id: string): Promise<ConversationDetail> {
    return request("GET", `/api/conversations/${enc(id)}`);
  },
  renameConversation(id: string, title: string): Promise<unknown> {
    return request("PATCH", `/api/conversations/${enc(id)}`, { title });
  },
  deleteConversation(id: string): Promise<unknown> {
    return request("DELETE", `/api/conversations/${enc(id)}`);
  },
  stop(id: string): Promise<unknown> {
    return request("POST", `/api/chat/${enc(id)}/stop`);
  },
  approve(id: string, decisions: ApprovalDecision[]): Promise<{ ok: boolean; continued: boolean }> {
    return request("POST", `/api/chat/${enc(id)}/approvals`, { decisions });
  },
  models(): Promise<ModelList> {
    return request("GET", "/api/models");
  },
  status(): Promise<{ conversations: Record<string, ConversationStatus>; titled?: number }> {
    return request("GET", "/api/status");
  },
  /**
   * A submit that does not go through useChat (a steer, or a multi-model turn whose answers are
   * rendered from the events endpoint). The response stream is closed at once: closing a
   * connection never stops an answer, and the UI follows it through resume / events.
   */
  async submitDetached(body: ChatRequestBody): Promise<void> {
    const res = await fetch("/api/chat", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    if (!res.ok) throw new ApiError(res.status, detailFromBody(await res.text(), res.status));
    await res.body?.cancel().catch(() => undefined);
  },
  eventsUrl(id: string): string {
    return `/api/conversations/${enc(id)}/events`;
  },
};

/** The body of POST /api/chat: DefaultChatTransport's body plus Drupe's options. */
export interface ChatRequestBody {
  id: string;
  messages: UIMessage[];
  trigger: "submit-message" | "regenerate-message";
  messageId?: string;
  /** Submit only: the message has no parent (editing the first message); not with parentId. */
  newRoot?: boolean;
  /** Submit only: the message the new user message follows (edit and resend: a new branch). */
  parentId?: string;
  models?: string[];
  strategy?: Strategy;
}

export function isLiveStatus(status: ConversationStatus | undefined): boolean {
  return status === "pending" || status === "streaming";
}

/** A client-side id for a user message (the server may assign its own). */
export function newId(): string {
  if (typeof crypto !== "undefined" && "randomUUID" in crypto) return crypto.randomUUID();
  return `m-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
}
