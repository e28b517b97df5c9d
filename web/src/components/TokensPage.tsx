// Personal tokens (`#/tokens`): the caller's tokens (name, prefix, dates), a form that creates
// one and shows its value once (with a copy button), and revoke. Only the prefix is ever listed.
import { useCallback, useEffect, useState } from "react";
import { errorMessage } from "../api";
import { authApi, type PersonalToken } from "../auth";
import { CopyButton } from "./CopyButton";

function when(iso: string | null): string {
  return iso ? new Date(iso).toLocaleString() : "never";
}

export function TokensPage() {
  const [tokens, setTokens] = useState<PersonalToken[] | null>(null);
  const [name, setName] = useState("");
  const [created, setCreated] = useState<{ name: string; token: string } | null>(null);
  const [error, setError] = useState<string | null>(null);

  const reload = useCallback(async () => {
    try {
      setTokens((await authApi.listTokens()).tokens);
    } catch (e) {
      setError(errorMessage(e));
    }
  }, []);
  useEffect(() => void reload(), [reload]);

  const create = async (e: React.FormEvent) => {
    e.preventDefault();
    setError(null);
    try {
      const answer = await authApi.createToken(name.trim() || "token");
      setCreated({ name: answer.name, token: answer.token });
      setName("");
      await reload();
    } catch (err) {
      setError(errorMessage(err));
    }
  };

  const revoke = async (id: string) => {
    setError(null);
    try {
      await authApi.revokeToken(id);
      await reload();
    } catch (err) {
      setError(errorMessage(err));
    }
  };

  return (
    <section className="settings-page" data-testid="tokens-page">
      <h2>Personal tokens</h2>
      <p className="muted small">
        A token acts as you on every <code>/api</code> route: send it as{" "}
        <code>Authorization: Bearer &lt;token&gt;</code>.
      </p>
      <form className="inline-form" onSubmit={create}>
        <input
          aria-label="Token name"
          placeholder="Name (e.g. laptop script)"
          maxLength={100}
          data-testid="token-name"
          value={name}
          onChange={(e) => setName(e.target.value)}
        />
        <button type="submit" className="primary" data-testid="token-create">
          Create token
        </button>
      </form>
      {created && (
        <div className="notice new-token" role="status" data-testid="new-token-box">
          <p>
            Copy the token <strong>{created.name}</strong> now: it is shown only once.
          </p>
          <div className="token-value">
            <code data-testid="new-token">{created.token}</code>
            <CopyButton text={created.token} label="Copy the token" testId="copy-token" />
          </div>
          <button type="button" className="ghost small" data-testid="new-token-done" onClick={() => setCreated(null)}>
            Done
          </button>
        </div>
      )}
      {error && (
        <div className="notice error" role="alert" data-testid="tokens-error">
          {error}
        </div>
      )}
      {tokens === null ? (
        <p className="muted">Loading…</p>
      ) : tokens.length === 0 ? (
        <p className="muted" data-testid="tokens-empty">
          No tokens yet.
        </p>
      ) : (
        <table className="data-table" data-testid="tokens-table">
          <thead>
            <tr>
              <th>Name</th>
              <th>Starts with</th>
              <th>Created</th>
              <th>Last used</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {tokens.map((t) => (
              <tr key={t.id} data-testid="token-row" data-token-id={t.id} data-revoked={String(t.revoked)}>
                <td>{t.name}</td>
                <td>
                  <code>{t.prefix}…</code>
                </td>
                <td>{when(t.createdAt)}</td>
                <td>{when(t.lastUsedAt)}</td>
                <td>
                  {t.revoked ? (
                    <span className="muted">revoked</span>
                  ) : (
                    <button
                      type="button"
                      className="danger small"
                      data-testid="token-revoke"
                      onClick={() => void revoke(t.id)}
                    >
                      Revoke
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
