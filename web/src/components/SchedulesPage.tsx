// The scheduled-tasks page (#/schedules): each schedule with its next fire time, run now, pause
// and resume, and its run history; a small form creates a schedule for an agent.
import { useCallback, useEffect, useState } from "react";
import { errorMessage } from "../api";
import { agentsApi, type Agent } from "../agentsApi";
import { describeTrigger, formatDuration, type Schedule, type TaskRun, tasksApi, type Trigger } from "../tasksApi";

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

function CreateForm({ agents, onCreated }: { agents: Agent[]; onCreated: () => void }) {
  const [agentId, setAgentId] = useState("");
  const [name, setName] = useState("");
  const [prompt, setPrompt] = useState("");
  const [kind, setKind] = useState<"cron" | "interval">("cron");
  const [expr, setExpr] = useState("0 9 * * *");
  const [timezone, setTimezone] = useState(() => Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC");
  const [minutes, setMinutes] = useState(60);
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: React.FormEvent) => {
    e.preventDefault();
    const trigger: Trigger = kind === "cron" ? { kind, expr, timezone } : { kind, seconds: minutes * 60 };
    try {
      await tasksApi.create({ agentId: agentId || agents[0]?.id || "", name, prompt, trigger });
      setName("");
      setPrompt("");
      setError(null);
      onCreated();
    } catch (err) {
      setError(errorMessage(err));
    }
  };
  return (
    <form className="schedule-form" data-testid="schedule-form" onSubmit={submit}>
      <label className="field">
        <span>Agent</span>
        <select value={agentId} onChange={(e) => setAgentId(e.target.value)} data-testid="schedule-agent">
          {agents.map((a) => (
            <option key={a.id} value={a.id}>
              {a.name}
            </option>
          ))}
        </select>
      </label>
      <label className="field">
        <span>Name</span>
        <input value={name} onChange={(e) => setName(e.target.value)} data-testid="schedule-name" />
      </label>
      <label className="field grow">
        <span>Prompt</span>
        <input value={prompt} onChange={(e) => setPrompt(e.target.value)} data-testid="schedule-prompt" />
      </label>
      <label className="field">
        <span>Repeat</span>
        <select value={kind} onChange={(e) => setKind(e.target.value as "cron" | "interval")} data-testid="schedule-kind">
          <option value="cron">cron</option>
          <option value="interval">every N minutes</option>
        </select>
      </label>
      {kind === "cron" ? (
        <>
          <label className="field">
            <span>Cron expression</span>
            <input value={expr} onChange={(e) => setExpr(e.target.value)} data-testid="schedule-cron" />
          </label>
          <label className="field">
            <span>Time zone</span>
            <input value={timezone} onChange={(e) => setTimezone(e.target.value)} data-testid="schedule-tz" />
          </label>
        </>
      ) : (
        <label className="field">
          <span>Minutes between runs</span>
          <input
            type="number"
            min={1}
            value={minutes}
            onChange={(e) => setMinutes(Number(e.target.value))}
            data-testid="schedule-minutes"
          />
        </label>
      )}
      <button type="submit" disabled={!agents.length} data-testid="create-schedule">
        Create
      </button>
      {error ? (
        <div className="notice error" role="alert" data-testid="schedule-error">
          {error}
        </div>
      ) : null}
    </form>
  );
}

export function SchedulesPage() {
  const [items, setItems] = useState<Schedule[]>([]);
  const [agents, setAgents] = useState<Agent[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [versions, setVersions] = useState<Record<string, number>>({});
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
      <CreateForm agents={agents} onCreated={() => void reload()} />
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
          </div>
          <History scheduleId={s.id} version={versions[s.id] ?? 0} />
        </article>
      ))}
    </section>
  );
}
