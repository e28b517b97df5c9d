// The schedule form: create a schedule for an agent, or edit one (PATCH). Every option of
// `drupe task add`: name, prompt, cron (with time zone) or interval, timeout, fresh or sticky
// session, what to do with missed runs, delivery to channel chats. The server validates; its
// message is shown under the field it names, and nothing is saved when it refuses.
import { useId, useState } from "react";
import { ApiError, errorMessage } from "../api";
import type { Agent } from "../agentsApi";
import { fieldOfError, formatTargets, parseTargets, type ScheduleField } from "../scheduleForm";
import { type Schedule, tasksApi, type Trigger } from "../tasksApi";

export function ScheduleForm({
  agents,
  editing,
  onSaved,
  onCancel,
}: {
  agents: Agent[];
  /** The schedule to edit; none: create a new one. */
  editing?: Schedule;
  onSaved: () => void;
  onCancel?: () => void;
}) {
  const t = editing?.trigger;
  const [agentId, setAgentId] = useState(editing?.agentId ?? "");
  const [name, setName] = useState(editing?.name ?? "");
  const [prompt, setPrompt] = useState(editing?.prompt ?? "");
  const [kind, setKind] = useState<"cron" | "interval">(t?.kind === "interval" ? "interval" : "cron");
  const [expr, setExpr] = useState(t?.kind === "cron" ? (t.expr ?? "") : "0 9 * * *");
  const [timezone, setTimezone] = useState(
    t?.kind === "cron" && t.timezone ? t.timezone : Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC",
  );
  const [minutes, setMinutes] = useState(t?.kind === "interval" ? Math.round((t.seconds ?? 3600) / 60) : 60);
  const [timeout, setTimeoutMinutes] = useState(String(editing?.timeoutMinutes ?? 2));
  const [sessionMode, setSessionMode] = useState<"fresh" | "sticky">(editing?.sessionMode ?? "fresh");
  const [missedPolicy, setMissedPolicy] = useState<"skip" | "run-once">(editing?.missedPolicy ?? "skip");
  const [targets, setTargets] = useState(formatTargets(editing?.deliverTo ?? []));
  const [errors, setErrors] = useState<Partial<Record<ScheduleField, string>>>({});
  const prefix = useId();
  const id = (field: string) => `${prefix}-${field}`;

  const submit = async (e: React.FormEvent) => {
    e.preventDefault();
    const deliverTo = parseTargets(targets);
    if (typeof deliverTo === "string") {
      setErrors({ deliverTo });
      return;
    }
    const timeoutMinutes = Number(timeout);
    if (!Number.isInteger(timeoutMinutes) || timeoutMinutes < 0) {
      setErrors({ timeout: "Minutes: a whole number, 0 for no timeout." });
      return;
    }
    const trigger: Trigger = kind === "cron" ? { kind, expr, timezone } : { kind, seconds: minutes * 60 };
    const options = { name, prompt, trigger, timeoutMinutes, sessionMode, missedPolicy, deliverTo };
    try {
      if (editing) await tasksApi.update(editing.id, options);
      else await tasksApi.create({ agentId: agentId || agents[0]?.id || "", ...options });
      setErrors({});
      if (!editing) {
        setName("");
        setPrompt("");
      }
      onSaved();
    } catch (err) {
      const message = errorMessage(err);
      setErrors({ [err instanceof ApiError && err.status < 500 ? fieldOfError(message) : "form"]: message });
    }
  };

  const fieldError = (field: ScheduleField) =>
    errors[field] ? (
      <span className="field-error" role="alert" id={id(`${field}-error`)} data-testid={`error-${field}`}>
        {errors[field]}
      </span>
    ) : null;
  const described = (field: ScheduleField) =>
    errors[field] ? { "aria-invalid": true, "aria-describedby": id(`${field}-error`) } : {};

  return (
    <form className="schedule-form" data-testid={editing ? "schedule-edit-form" : "schedule-form"} onSubmit={submit}>
      {!editing && (
        <label className="field">
          <span>Agent</span>
          <select value={agentId} onChange={(e) => setAgentId(e.target.value)} data-testid="schedule-agent" {...described("agent")}>
            {agents.length === 0 && <option value="">No agents: create one under Agents</option>}
            {agents.map((a) => (
              <option key={a.id} value={a.id}>
                {a.name}
              </option>
            ))}
          </select>
          {fieldError("agent")}
        </label>
      )}
      <label className="field">
        <span>Name</span>
        <input value={name} onChange={(e) => setName(e.target.value)} data-testid="schedule-name" {...described("name")} />
        {fieldError("name")}
      </label>
      <label className="field grow">
        <span>Prompt</span>
        <input value={prompt} onChange={(e) => setPrompt(e.target.value)} data-testid="schedule-prompt" {...described("prompt")} />
        {fieldError("prompt")}
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
            <input value={expr} onChange={(e) => setExpr(e.target.value)} data-testid="schedule-cron" {...described("expr")} />
            {fieldError("expr")}
          </label>
          <label className="field">
            <span>Time zone</span>
            <input value={timezone} onChange={(e) => setTimezone(e.target.value)} data-testid="schedule-tz" {...described("timezone")} />
            {fieldError("timezone")}
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
            {...described("minutes")}
          />
          {fieldError("minutes")}
        </label>
      )}
      <label className="field">
        <span>Timeout (minutes, 0: none)</span>
        <input
          inputMode="numeric"
          value={timeout}
          onChange={(e) => setTimeoutMinutes(e.target.value)}
          data-testid="schedule-timeout"
          {...described("timeout")}
        />
        {fieldError("timeout")}
      </label>
      <label className="field">
        <span>Session</span>
        <select value={sessionMode} onChange={(e) => setSessionMode(e.target.value as "fresh" | "sticky")} data-testid="schedule-session">
          <option value="fresh">a fresh session per run</option>
          <option value="sticky">one sticky session</option>
        </select>
      </label>
      <label className="field">
        <span>Missed runs</span>
        <select value={missedPolicy} onChange={(e) => setMissedPolicy(e.target.value as "skip" | "run-once")} data-testid="schedule-missed">
          <option value="skip">skip</option>
          <option value="run-once">run once</option>
        </select>
      </label>
      <label className="field grow">
        <span>Deliver to (channel:chat, …)</span>
        <input
          value={targets}
          placeholder="telegram:123456, slack:C0123"
          onChange={(e) => setTargets(e.target.value)}
          data-testid="schedule-deliver"
          {...described("deliverTo")}
        />
        {fieldError("deliverTo")}
      </label>
      <button type="submit" disabled={!editing && !agents.length} data-testid={editing ? "save-schedule" : "create-schedule"}>
        {editing ? "Save" : "Create"}
      </button>
      {onCancel && (
        <button type="button" className="ghost" onClick={onCancel} data-testid="cancel-edit">
          Cancel
        </button>
      )}
      {errors.form ? (
        <div className="notice error" role="alert" data-testid="schedule-error">
          {errors.form}
        </div>
      ) : null}
    </form>
  );
}
