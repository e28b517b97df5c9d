// Providers & models (`#/settings/providers`, admins): config.toml's providers and the ones
// stored in the database, which win over a config.toml one of the same name (the card says
// which). Add / edit / delete stored providers; "Test connection" makes one real call and shows
// ok and the latency, or the error next to the base URL. API keys are write-only (last 4 shown).
import { type FormEvent, useCallback, useEffect, useState } from "react";
import { ApiError, errorMessage } from "../api";
import {
  type ConnectionResult,
  fieldError,
  PROVIDER_TYPES,
  type Provider,
  providersApi,
} from "../settingsApi";

/** Tell the model picker to reload `/api/models` (a provider changed). */
function modelsChanged() {
  window.dispatchEvent(new Event("drupe:models-changed"));
}

interface Draft {
  name: string;
  type: string;
  baseUrl: string;
  apiKey: string;
  models: string;
}

const EMPTY: Draft = { name: "", type: "openai-compatible", baseUrl: "", apiKey: "", models: "" };

function draftOf(p: Provider): Draft {
  return { name: p.name, type: p.type, baseUrl: p.baseUrl ?? "", apiKey: "", models: p.models.map((m) => m.name).join(", ") };
}

function Field({ id, label, error, children }: { id: string; label: string; error?: string; children: React.ReactNode }) {
  return (
    <label className="field" htmlFor={id}>
      <span>{label}</span>
      {children}
      {error && (
        <small className="field-error" role="alert" data-testid={`error-${id}`}>
          {error}
        </small>
      )}
    </label>
  );
}

function ProviderForm({ editing, initial, onDone }: { editing: Provider | null; initial: Draft; onDone: (saved: string | null) => void }) {
  const [draft, setDraft] = useState(initial);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [busy, setBusy] = useState(false);
  const set = (k: keyof Draft) => (e: { target: { value: string } }) => setDraft({ ...draft, [k]: e.target.value });

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const local: Record<string, string> = {};
    if (!editing && !draft.name.trim()) local.name = "A provider needs a name.";
    if (draft.type === "openai-compatible" && !draft.baseUrl.trim()) local.baseUrl = "An OpenAI-compatible provider needs its server's URL.";
    if (draft.baseUrl.trim() && !/^https?:\/\/\S+$/.test(draft.baseUrl.trim())) local.baseUrl = "Use an http:// or https:// URL.";
    setErrors(local);
    if (Object.keys(local).length) return;
    const body = {
      type: draft.type,
      baseUrl: draft.baseUrl.trim() || undefined,
      apiKey: draft.apiKey ? draft.apiKey : undefined,
      models: draft.models.split(/[\s,]+/).filter(Boolean),
    };
    setBusy(true);
    try {
      if (editing) await providersApi.update(editing.name, body);
      else await providersApi.create(draft.name.trim(), body);
      onDone(editing ? editing.name : draft.name.trim());
    } catch (err) {
      const [field, message] = fieldError(errorMessage(err));
      setErrors({ [field ?? "form"]: err instanceof ApiError && err.status === 403 ? "Only an admin may change providers." : message });
    } finally {
      setBusy(false);
    }
  };

  return (
    <form className="settings-card provider-form" onSubmit={submit} data-testid="provider-form" noValidate>
      <h3>{editing ? `Edit ${editing.name}` : "Add a provider"}</h3>
      {editing?.source === "config" && (
        <p className="muted small">Saving stores an override in the database; it wins over config.toml.</p>
      )}
      <div className="form-grid">
        <Field id="name" label="Name" error={errors.name}>
          <input id="name" value={draft.name} onChange={set("name")} disabled={editing !== null} placeholder="lab" />
        </Field>
        <Field id="type" label="Kind" error={errors.type}>
          <select id="type" value={draft.type} onChange={set("type")}>
            {PROVIDER_TYPES.map((t) => (
              <option key={t}>{t}</option>
            ))}
          </select>
        </Field>
        <Field id="baseUrl" label="Base URL" error={errors.baseUrl}>
          <input id="baseUrl" value={draft.baseUrl} onChange={set("baseUrl")} placeholder="http://127.0.0.1:11434/v1" />
        </Field>
        <Field id="apiKey" label="API key" error={errors.apiKey}>
          <input
            id="apiKey"
            type="password"
            autoComplete="off"
            value={draft.apiKey}
            onChange={set("apiKey")}
            placeholder={editing?.apiKey.set ? `${editing.apiKey.hint} (kept if blank)` : "none"}
          />
        </Field>
        <Field id="models" label="Models (comma-separated)" error={errors.models}>
          <input id="models" value={draft.models} onChange={set("models")} placeholder="llama3.2, qwen3" />
        </Field>
      </div>
      {errors.form && (
        <p className="notice error small" role="alert" data-testid="provider-form-error">
          {errors.form}
        </p>
      )}
      <div className="row">
        <button type="submit" disabled={busy} data-testid="provider-save">
          {busy ? "Saving…" : "Save"}
        </button>
        <button type="button" className="secondary" onClick={() => onDone(null)}>
          Cancel
        </button>
      </div>
    </form>
  );
}

function ProviderCard({ p, onEdit, onChanged }: { p: Provider; onEdit: () => void; onChanged: () => void }) {
  const [result, setResult] = useState<ConnectionResult | null>(null);
  const [testing, setTesting] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const test = async () => {
    setTesting(true);
    setResult(null);
    try {
      setResult(await providersApi.test(p.name));
    } catch (err) {
      setResult({ ok: false, latencyMs: 0, models: null, error: errorMessage(err) });
    } finally {
      setTesting(false);
    }
  };
  const remove = async () => {
    if (!window.confirm(`Delete the stored provider ${p.name}?`)) return;
    try {
      await providersApi.remove(p.name);
      modelsChanged();
      onChanged();
    } catch (err) {
      setError(errorMessage(err));
    }
  };
  return (
    <article className="settings-card" data-testid="provider" data-provider={p.name} data-source={p.source}>
      <header>
        <strong>{p.name}</strong> <code className="muted">{p.type}</code>
        <span className={`state-pill source-${p.source}`} data-testid="provider-source">
          {p.source === "database" ? "database" : "config.toml"}
        </span>
        {p.overrides && (
          <span className="muted small" data-testid="provider-overrides">
            wins over {p.overrides}
          </span>
        )}
      </header>
      <p className="muted small">
        URL: <code>{p.baseUrl ?? "default"}</code> · key: {p.apiKey.set ? <code>{p.apiKey.hint}</code> : "none"}
      </p>
      {result && !result.ok && (
        <p className="notice error small" role="alert" data-testid="provider-unreachable">
          Unreachable: {result.error}
        </p>
      )}
      <p className="small">
        {p.models.length ? p.models.map((m) => <code key={m.name} className="model-chip">{`${p.name}:${m.name}`}</code>) : <span className="muted">no models listed</span>}
      </p>
      {error && <p className="notice error small">{error}</p>}
      <div className="row">
        <button type="button" className="secondary" onClick={test} disabled={testing} data-testid="provider-test">
          {testing ? "Testing…" : "Test connection"}
        </button>
        {result && (
          <span className={result.ok ? "ok small" : "err small"} data-testid="provider-test-result">
            {result.ok ? `OK · ${result.latencyMs} ms · ${result.models ?? 0} models` : "failed"}
          </span>
        )}
        <button type="button" className="secondary" onClick={onEdit} data-testid="provider-edit">
          Edit
        </button>
        {p.deletable && (
          <button type="button" className="secondary danger" onClick={remove} data-testid="provider-delete">
            Delete
          </button>
        )}
      </div>
    </article>
  );
}

export function ProvidersPage() {
  const [providers, setProviders] = useState<Provider[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [form, setForm] = useState<{ editing: Provider | null } | null>(null);
  const load = useCallback(
    () =>
      providersApi
        .list()
        .then((r) => (setProviders(r.items), setError(null)))
        .catch((e) => setError(errorMessage(e))),
    [],
  );
  useEffect(() => void load(), [load]);
  const done = (saved: string | null) => {
    setForm(null);
    if (saved) {
      modelsChanged();
      void load();
    }
  };
  return (
    <section className="settings-page" data-testid="providers-page">
      <h2>Providers &amp; models</h2>
      <p className="muted small">
        From <code>config.toml</code> and added here. A provider added here wins over a <code>config.toml</code> one of the
        same name. Changes apply at once, without a restart.
      </p>
      {error && (
        <div className="notice error" role="alert" data-testid="providers-error">
          {error}
        </div>
      )}
      {form ? (
        <ProviderForm key={form.editing?.name ?? "new"} editing={form.editing} initial={form.editing ? draftOf(form.editing) : EMPTY} onDone={done} />
      ) : (
        <button type="button" onClick={() => setForm({ editing: null })} data-testid="provider-add">
          Add provider
        </button>
      )}
      {providers === null ? (
        !error && <p className="muted">Loading…</p>
      ) : (
        <div className="settings-cards">
          {providers.map((p) => (
            <ProviderCard key={p.name} p={p} onEdit={() => setForm({ editing: p })} onChanged={load} />
          ))}
        </div>
      )}
    </section>
  );
}
