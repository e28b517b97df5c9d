// The scheduled-tasks page (#/schedules): each schedule with its next fire time, run now, pause
// and resume, edit and delete, and its run history; a form creates a schedule for an agent.
import { useCallback, useEffect, useState } from "react";
import { errorMessage } from "../api";
import { agentsApi, type Agent } from "../agentsApi";
import { describeTrigger, formatDuration, type Schedule, type TaskRun, tasksApi } from "../tasksApi";
import { ScheduleForm } from "./ScheduleForm";

function when(iso: string | null): string {
  return iso ? new Date(iso).toLocaleString() : "–";
}

function History({ scheduleId, version }: { scheduleId: string; version: number }) {
  const [runs, setRuns] = useState<TaskRun[] | null>(null);
  useEffect(() => {
    let cancelled = false;
    const load = () =>
      tasksApi
        .runs(scheduleId)
        .then((r) => !cancelled && setRuns(r.items))
        .catch(() => undefined);
    void load();
    const timer = setInterval(() => void load(), 1500);
    return () => {
      cancelled = true;
      clearInterval(timer);
    };
  }, [scheduleId, version]);
  if (runs === null) return null;
  if (!runs.length) return <p className="muted" data-testid="run-history-empty">No runs yet.</p>;
  return (
    <table className="run-history" data-testid="run-history">
      <thead>
        <tr>
          <th>Started</th>
          <th>Status</th>
          <th>Duration</th>
          <th>Result</th>
        </tr>
      </thead>
      <tbody>
        {runs.map((r) => (
          <tr key={r.id} data-testid="run-row" data-status={r.status}>
            <td>{when(r.startedAt)}</td>
            <td>{r.status}</td>
            <td>{formatDuration(r.durationMs)}</td>
            <td>
              {r.error ?? r.result ?? ""}
              {r.conversationId ? (
                <>
                  {" "}
                  <a href={`#/c/${encodeURIComponent(r.conversationId)}`}>open</a>{" "}
                  <a href={`#/trace/${encodeURIComponent(r.conversationId)}`}>trace</a>
                </>
              ) : null}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function SchedulesPage() {
  const [items, setItems] = useState<Schedule[]>([]);
  const [agents, setAgents] = useState<Agent[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [versions, setVersions] = useState<Record<string, number>>({});
  const [editingId, setEditingId] = useState<string | null>(null);
  const [deletingId, setDeletingId] = useState<string | null>(null);
  const reload = useCallback(async () => {
    try {
      setItems((await tasksApi.list()).items);
      setError(null);
    } catch (e) {
      setError(errorMessage(e));
    }
  }, []);
  useEffect(() => {
    void reload();
    agentsApi
      .listAgents()
      .then((a) => setAgents(a.items))
      .catch(() => undefined);
  }, [reload]);
  const act = async (id: string, action: (id: string) => Promise<unknown>) => {
    try {
      await action(id);
      setVersions((v) => ({ ...v, [id]: (v[id] ?? 0) + 1 }));
      await reload();
    } catch (e) {
      setError(errorMessage(e));
    }
  };
  return (
    <section className="schedules" data-testid="schedules-page">
      <h2>Scheduled tasks</h2>
      {error ? (
        <div className="notice error" role="alert">
          {error}
        </div>
      ) : null}
      <ScheduleForm agents={agents} onSaved={() => void reload()} />
      {!items.length ? <p className="muted">No scheduled tasks yet.</p> : null}
      {items.map((s) => (
        <article key={s.id} className="schedule" data-testid="schedule-item" data-schedule-id={s.id} data-enabled={String(s.enabled)}>
          <header>
            <strong>{s.name}</strong> <span className="muted">{describeTrigger(s.trigger)}</span>
            {s.kind === "heartbeat" ? <span className="badge">heartbeat</span> : null}
          </header>
          <p>
            Next fire: <span data-testid="next-run">{s.enabled ? when(s.nextRunAt) : "paused"}</span> · last:{" "}
            {when(s.lastRunAt)}
          </p>
          <div className="actions">
            <button type="button" onClick={() => void act(s.id, tasksApi.runNow)} data-testid="run-now">
              Run now
            </button>
            {s.enabled ? (
              <button type="button" onClick={() => void act(s.id, tasksApi.pause)} data-testid="pause">
                Pause
              </button>
            ) : (
              <button type="button" onClick={() => void act(s.id, tasksApi.resume)} data-testid="resume">
                Resume
              </button>
            )}
            <button type="button" onClick={() => setEditingId(editingId === s.id ? null : s.id)} data-testid="edit">
              Edit
            </button>
            {deletingId === s.id ? (
              <>
                <button
                  type="button"
                  className="danger"
                  data-testid="confirm-delete"
                  onClick={() => {
                    setDeletingId(null);
                    void act(s.id, tasksApi.remove);
                  }}
                >
                  Delete {s.name}
                </button>
                <button type="button" className="ghost" onClick={() => setDeletingId(null)}>
                  Keep
                </button>
              </>
            ) : (
              <button type="button" className="danger" onClick={() => setDeletingId(s.id)} data-testid="delete">
                Delete
              </button>
            )}
          </div>
          {editingId === s.id && (
            <ScheduleForm
              agents={agents}
              editing={s}
              onSaved={() => {
                setEditingId(null);
                void reload();
              }}
              onCancel={() => setEditingId(null)}
            />
          )}
          <History scheduleId={s.id} version={versions[s.id] ?? 0} />
        </article>
      ))}
    </section>
  );
}
