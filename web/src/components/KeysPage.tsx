// Gateway keys (`#/settings/keys`): the caller's keys (an admin: everyone's, with the owner),
// a form that creates one with its scopes (models, agents, requests per minute, tokens per
// day) and shows the key once with a copy button, revoke, and each key's /v1 usage over the
// last 30 days (GET /api/usage's gateway.keys).
import { useCallback, useEffect, useState } from "react";
import { errorMessage } from "../api";
import { budget, type GatewayKey, idList, type KeyUsage, settingsApi } from "../settingsApi";
import { CopyButton } from "./CopyButton";

const USAGE_DAYS = 30;

function when(iso: string | null): string {
  return iso ? new Date(iso).toLocaleString() : "never";
}

function scopeText(k: GatewayKey): string {
  const parts = [
    k.models ? `models: ${k.models.join(", ")}` : "any model",
    k.agents ? `agents: ${k.agents.join(", ")}` : "any agent",
  ];
  if (k.requestsPerMinute) parts.push(`${k.requestsPerMinute}/min`);
  if (k.tokensPerDay) parts.push(`${k.tokensPerDay.toLocaleString()} tokens/day`);
  return parts.join(" · ");
}

function Field({ label, id, hint, ...input }: { label: string; id: string; hint?: string } & React.InputHTMLAttributes<HTMLInputElement>) {
  return (
    <label className="field" htmlFor={id}>
      <span>{label}</span>
      <input id={id} data-testid={id} {...input} />
      {hint && <small className="muted">{hint}</small>}
    </label>
  );
}

export function KeysPage() {
  const [keys, setKeys] = useState<GatewayKey[] | null>(null);
  const [usage, setUsage] = useState<Map<string, KeyUsage>>(new Map());
  const [form, setForm] = useState({ name: "", models: "", agents: "", rpm: "", tpd: "" });
  const [created, setCreated] = useState<{ name: string; key: string } | null>(null);
  const [error, setError] = useState<string | null>(null);

  const reload = useCallback(async () => {
    try {
      setKeys((await settingsApi.listKeys()).items);
      const counts = await settingsApi.keyUsage(USAGE_DAYS);
      setUsage(new Map(counts.filter((c) => c.keyId).map((c) => [c.keyId as string, c])));
    } catch (e) {
      setError(errorMessage(e));
    }
  }, []);
  useEffect(() => void reload(), [reload]);

  const set = (field: keyof typeof form) => (e: React.ChangeEvent<HTMLInputElement>) =>
    setForm((f) => ({ ...f, [field]: e.target.value }));

  const create = async (e: React.FormEvent) => {
    e.preventDefault();
    setError(null);
    try {
      const answer = await settingsApi.createKey({
        name: form.name.trim() || "key",
        models: idList(form.models),
        agents: idList(form.agents),
        requestsPerMinute: budget(form.rpm, "Requests per minute"),
        tokensPerDay: budget(form.tpd, "Tokens per day"),
      });
      setCreated({ name: answer.name, key: answer.key });
      setForm({ name: "", models: "", agents: "", rpm: "", tpd: "" });
      await reload();
    } catch (err) {
      setError(errorMessage(err));
    }
  };

  const revoke = async (id: string) => {
    setError(null);
    try {
      await settingsApi.revokeKey(id);
      await reload();
    } catch (err) {
      setError(errorMessage(err));
    }
  };

  const showOwner = keys?.some((k) => k.ownerName !== null && k.ownerId !== keys[0]?.ownerId) ?? false;
  return (
    <section className="settings-page" data-testid="keys-page">
      <h2>Gateway keys</h2>
      <p className="muted small">
        A key lets a client use the OpenAI/Anthropic-compatible <code>/v1</code> routes as you: send it as{" "}
        <code>Authorization: Bearer &lt;key&gt;</code>. Leave a scope blank for no limit.
      </p>
      <form className="key-form" onSubmit={create} data-testid="key-form">
        <Field label="Name" id="key-name" placeholder="e.g. editor plugin" maxLength={100} required value={form.name} onChange={set("name")} />
        <Field label="Models" id="key-models" placeholder="any" hint="ids, comma-separated (provider:* allowed)" value={form.models} onChange={set("models")} />
        <Field label="Agents" id="key-agents" placeholder="any" hint="agent ids, comma-separated" value={form.agents} onChange={set("agents")} />
        <Field label="Requests per minute" id="key-rpm" inputMode="numeric" placeholder="unlimited" value={form.rpm} onChange={set("rpm")} />
        <Field label="Tokens per day" id="key-tpd" inputMode="numeric" placeholder="unlimited" value={form.tpd} onChange={set("tpd")} />
        <button type="submit" className="primary" data-testid="key-create">
          Create key
        </button>
      </form>
      {created && (
        <div className="notice new-token" role="status" data-testid="new-key-box">
          <p>
            Copy the key <strong>{created.name}</strong> now: it is shown only once.
          </p>
          <div className="token-value">
            <code data-testid="new-key">{created.key}</code>
            <CopyButton text={created.key} label="Copy the key" testId="copy-key" />
          </div>
          <button type="button" className="ghost small" data-testid="new-key-done" onClick={() => setCreated(null)}>
            Done
          </button>
        </div>
      )}
      {error && (
        <div className="notice error" role="alert" data-testid="keys-error">
          {error}
        </div>
      )}
      {keys === null ? (
        !error && <p className="muted">Loading…</p>
      ) : keys.length === 0 ? (
        <p className="muted" data-testid="keys-empty">
          No gateway keys yet.
        </p>
      ) : (
        <div className="table-scroll">
          <table className="data-table" data-testid="keys-table">
            <thead>
              <tr>
                <th>Name</th>
                {showOwner && <th>Owner</th>}
                <th>Starts with</th>
                <th>Scope</th>
                <th>Last used</th>
                <th>Requests ({USAGE_DAYS} d)</th>
                <th>Tokens ({USAGE_DAYS} d)</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {keys.map((k) => {
                const used = usage.get(k.id);
                return (
                  <tr key={k.id} data-testid="key-row" data-key-id={k.id} data-revoked={String(k.revoked)}>
                    <td>{k.name}</td>
                    {showOwner && <td data-testid="key-owner">{k.ownerName ?? "—"}</td>}
                    <td>
                      <code>{k.prefix}…</code>
                    </td>
                    <td className="small" data-testid="key-scope">
                      {scopeText(k)}
                    </td>
                    <td>{when(k.lastUsedAt)}</td>
                    <td data-testid="key-requests">{used?.requests ?? 0}</td>
                    <td data-testid="key-tokens">{(used?.totalTokens ?? 0).toLocaleString()}</td>
                    <td>
                      {k.revoked ? (
                        <span className="muted">revoked</span>
                      ) : (
                        <button
                          type="button"
                          className="danger small"
                          data-testid="key-revoke"
                          aria-label={`Revoke ${k.name}`}
                          onClick={() => void revoke(k.id)}
                        >
                          Revoke
                        </button>
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
