// Scheduled tasks and conversation traces over Drupe's HTTP API (/api/schedules, /api/runs,
// /api/conversations/{id}/trace), and the pure helpers their pages share.
import { ApiError, detailFromBody } from "./api";

export interface Trigger {
  kind: "cron" | "interval" | "once";
  expr?: string;
  timezone?: string;
  seconds?: number;
  at?: string;
}

export interface Schedule {
  id: string;
  name: string;
  agentId: string;
  kind: "task" | "heartbeat";
  prompt: string;
  trigger: Trigger;
  timeoutMinutes: number;
  sessionMode: "fresh" | "sticky";
  deliverTo: { channel: string; chat: string }[];
  missedPolicy: "skip" | "run-once";
  enabled: boolean;
  nextRunAt: string | null;
  lastRunAt: string | null;
}

export interface TaskRun {
  id: string;
  scheduleId: string | null;
  kind: string;
  status: "running" | "completed" | "failed" | "skipped" | "cancelled";
  conversationId: string | null;
  startedAt: string;
  finishedAt: string | null;
  result: string | null;
  error: string | null;
  durationMs: number | null;
}

export interface ScheduleOptions {
  name: string;
  prompt: string;
  trigger: Trigger;
  timeoutMinutes?: number;
  sessionMode?: "fresh" | "sticky";
  missedPolicy?: "skip" | "run-once";
  deliverTo?: { channel: string; chat: string }[];
}

export interface NewSchedule extends ScheduleOptions {
  agentId: string;
}

export interface TraceSpan {
  traceId: string;
  spanId: string;
  parentId: string | null;
  name: string;
  start: number;
  end: number;
  status: "OK" | "ERROR" | "UNSET";
  statusMessage: string | null;
  attributes: Record<string, unknown>;
}

export interface ConversationTrace {
  conversationId: string;
  traceId: string;
  spans: TraceSpan[];
}

async function request<T>(method: string, url: string, body?: unknown): Promise<T> {
  const res = await fetch(url, {
    method,
    headers: body === undefined ? undefined : { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw new ApiError(res.status, detailFromBody(await res.text(), res.status));
  if (res.status === 204) return undefined as T;
  return (await res.json()) as T;
}

const enc = encodeURIComponent;

export const tasksApi = {
  list(): Promise<{ items: Schedule[] }> {
    return request("GET", "/api/schedules");
  },
  create(body: NewSchedule): Promise<Schedule> {
    return request("POST", "/api/schedules", body);
  },
  update(id: string, body: Partial<ScheduleOptions>): Promise<Schedule> {
    return request("PATCH", `/api/schedules/${enc(id)}`, body);
  },
  runNow(id: string): Promise<TaskRun> {
    return request("POST", `/api/schedules/${enc(id)}/run`);
  },
  pause(id: string): Promise<Schedule> {
    return request("POST", `/api/schedules/${enc(id)}/pause`);
  },
  resume(id: string): Promise<Schedule> {
    return request("POST", `/api/schedules/${enc(id)}/resume`);
  },
  remove(id: string): Promise<void> {
    return request("DELETE", `/api/schedules/${enc(id)}`);
  },
  runs(id: string): Promise<{ items: TaskRun[] }> {
    return request("GET", `/api/schedules/${enc(id)}/runs?limit=20`);
  },
  trace(conversationId: string): Promise<ConversationTrace> {
    return request("GET", `/api/conversations/${enc(conversationId)}/trace`);
  },
};

/** A trigger in words: `cron 0 9 * * * (Europe/Berlin)`, `every 1h`, `once at …`. */
export function describeTrigger(t: Trigger): string {
  if (t.kind === "cron") return `cron ${t.expr ?? "?"} (${t.timezone ?? "UTC"})`;
  if (t.kind === "interval") return `every ${formatSeconds(t.seconds ?? 0)}`;
  return `once at ${t.at ?? "?"}`;
}

export function formatSeconds(seconds: number): string {
  if (seconds % 86400 === 0) return `${seconds / 86400}d`;
  if (seconds % 3600 === 0) return `${seconds / 3600}h`;
  if (seconds % 60 === 0) return `${seconds / 60}m`;
  return `${seconds}s`;
}

export function formatDuration(ms: number | null): string {
  if (ms === null) return "–";
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

export interface TimelineRow {
  span: TraceSpan;
  depth: number;
  offsetMs: number;
  durationMs: number;
  tokens: string | null;
}

/** Spans as timeline rows: parents before children (depth by parent links), by start time. */
export function timelineRows(spans: TraceSpan[]): TimelineRow[] {
  if (!spans.length) return [];
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const children = new Map<string | null, TraceSpan[]>();
  for (const s of spans) {
    const parent = s.parentId && byId.has(s.parentId) ? s.parentId : null;
    children.set(parent, [...(children.get(parent) ?? []), s]);
  }
  const t0 = Math.min(...spans.map((s) => s.start));
  const rows: TimelineRow[] = [];
  const walk = (parent: string | null, depth: number) => {
    const kids = [...(children.get(parent) ?? [])].sort((a, b) => a.start - b.start);
    for (const span of kids) {
      const input = span.attributes["gen_ai.usage.input_tokens"];
      const output = span.attributes["gen_ai.usage.output_tokens"];
      rows.push({
        span,
        depth,
        offsetMs: (span.start - t0) / 1e6,
        durationMs: (span.end - span.start) / 1e6,
        tokens: typeof input === "number" || typeof output === "number" ? `${input ?? 0} in / ${output ?? 0} out` : null,
      });
      walk(span.spanId, depth + 1);
    }
  };
  walk(null, 0);
  return rows;
}
