// A conversation's trace timeline (#/trace/<id>): turns (ai.turn), model steps and tool calls,
// each with its offset, duration, tokens and status, from GET /api/conversations/{id}/trace.
import { useEffect, useState } from "react";
import { errorMessage } from "../api";
import { type ConversationTrace, formatDuration, tasksApi, timelineRows } from "../tasksApi";

export function TracePanel({ conversationId }: { conversationId: string }) {
  const [trace, setTrace] = useState<ConversationTrace | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let cancelled = false;
    // Spans are flushed at each turn's end: re-read every 2 s while the panel is open.
    const load = () =>
      tasksApi
        .trace(conversationId)
        .then((t) => !cancelled && setTrace(t))
        .catch((e) => !cancelled && setError(errorMessage(e)));
    void load();
    const timer = setInterval(() => void load(), 2000);
    return () => {
      cancelled = true;
      clearInterval(timer);
    };
  }, [conversationId]);
  if (error)
    return (
      <section className="trace">
        <div className="notice error" role="alert" data-testid="trace-error">
          {error}
        </div>
      </section>
    );
  if (!trace) return <section className="trace loading" aria-busy="true" />;
  const rows = timelineRows(trace.spans);
  const total = Math.max(1, ...rows.map((r) => r.offsetMs + r.durationMs));
  return (
    <section className="trace" data-testid="trace-panel" data-trace-id={trace.traceId}>
      <h2>
        Trace <code>{trace.traceId}</code>
      </h2>
      <p>
        <a href={`#/c/${encodeURIComponent(conversationId)}`}>Back to the conversation</a>
      </p>
      {!rows.length ? <p className="muted" data-testid="trace-empty">No spans recorded yet.</p> : null}
      <ol className="timeline">
        {rows.map((r) => (
          <li
            key={r.span.spanId}
            className={`span depth-${Math.min(r.depth, 3)} status-${r.span.status.toLowerCase()}`}
            data-testid="trace-span"
            data-name={r.span.name}
            data-status={r.span.status}
            style={{ paddingLeft: `${r.depth * 1.25}rem` }}
          >
            <span className="span-name">{r.span.name}</span>
            <span className="span-bar" aria-hidden="true">
              <span
                style={{ marginLeft: `${(r.offsetMs / total) * 100}%`, width: `${Math.max(0.5, (r.durationMs / total) * 100)}%` }}
              />
            </span>
            <span className="span-duration" data-testid="span-duration">{formatDuration(r.durationMs)}</span>
            <span className="span-tokens" data-testid="span-tokens">{r.tokens ?? ""}</span>
            {r.span.status === "ERROR" ? <span className="span-error">{r.span.statusMessage}</span> : null}
          </li>
        ))}
      </ol>
    </section>
  );
}
