// The share dialog of a conversation (or an agent): who it is shared with (read or write),
// a user picked from the directory to add, a change of access, and remove. Escape, the ✕ and a
// click outside close it. For an agent it says what each access gives (OwnerPolicy: an agent's
// sessions are shared through the agent).
import { useCallback, useEffect, useState } from "react";
import { errorMessage } from "../api";
import { useAuth } from "../auth";
import { type ShareAccess, type ShareKind, type ShareRow, usersApi } from "../usersApi";

export function ShareDialog({
  kind,
  id,
  title,
  onClose,
}: {
  kind: ShareKind;
  id: string;
  title: string;
  onClose: () => void;
}) {
  const auth = useAuth();
  const me = auth.kind === "signed-in" ? auth.user.name : null;
  const [shares, setShares] = useState<ShareRow[] | null>(null);
  const [directory, setDirectory] = useState<{ id: string; name: string }[]>([]);
  const [pick, setPick] = useState("");
  const [access, setAccess] = useState<ShareAccess>("read");
  const [error, setError] = useState<string | null>(null);

  const reload = useCallback(async () => {
    try {
      setShares((await usersApi.shares(kind, id)).items);
    } catch (e) {
      setError(errorMessage(e));
    }
  }, [kind, id]);

  useEffect(() => {
    void reload();
    usersApi
      .directory()
      .then((d) => setDirectory(d.items))
      .catch((e) => setError(errorMessage(e)));
  }, [reload]);

  useEffect(() => {
    const onKey = (e: KeyboardEvent) => e.key === "Escape" && onClose();
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [onClose]);

  const run = async (action: () => Promise<unknown>) => {
    setError(null);
    try {
      await action();
    } catch (e) {
      setError(errorMessage(e));
    }
    await reload();
  };

  const sharedNames = new Set((shares ?? []).map((s) => s.name));
  const candidates = directory.filter((u) => u.name !== me && !sharedNames.has(u.name));

  return (
    <div className="dialog-backdrop" onClick={(e) => e.target === e.currentTarget && onClose()}>
      <div className="dialog" role="dialog" aria-modal="true" aria-labelledby="share-title" data-testid="share-dialog">
        <div className="dialog-head">
          <h2 id="share-title">Share “{title}”</h2>
          <button type="button" className="ghost" aria-label="Close" data-testid="share-close" onClick={onClose}>
            ✕
          </button>
        </div>
        {kind === "agent" && (
          <p className="muted small" data-testid="share-note">
            Can read: sees the agent, starts sessions of their own with it and can open yours. Can write:
            also changes the agent and writes in your sessions with it.
          </p>
        )}
        <form
          className="inline-form"
          onSubmit={(e) => {
            e.preventDefault();
            if (pick) void run(() => usersApi.share(kind, id, pick, access)).then(() => setPick(""));
          }}
        >
          <select aria-label="User" data-testid="share-user" value={pick} onChange={(e) => setPick(e.target.value)}>
            <option value="">Choose a user…</option>
            {candidates.map((u) => (
              <option key={u.id} value={u.name}>
                {u.name}
              </option>
            ))}
          </select>
          <AccessPicker value={access} onChange={setAccess} testId="share-access" />
          <button type="submit" className="primary" data-testid="share-add" disabled={!pick}>
            Share
          </button>
        </form>
        {error && (
          <div className="notice error" role="alert" data-testid="share-error">
            {error}
          </div>
        )}
        {shares === null ? (
          <p className="muted">Loading…</p>
        ) : shares.length === 0 ? (
          <p className="muted" data-testid="share-empty">
            Not shared with anyone.
          </p>
        ) : (
          <ul className="share-list">
            {shares.map((s) => (
              <li key={s.userId} data-testid="share-row" data-user-name={s.name} data-access={s.access}>
                <span className="share-name">{s.name}</span>
                <AccessPicker
                  value={s.access}
                  onChange={(a) => void run(() => usersApi.share(kind, id, s.name, a))}
                  testId="share-row-access"
                />
                <button
                  type="button"
                  className="danger small"
                  data-testid="share-remove"
                  aria-label={`Remove ${s.name}`}
                  onClick={() => void run(() => usersApi.unshare(kind, id, s.name))}
                >
                  Remove
                </button>
              </li>
            ))}
          </ul>
        )}
      </div>
    </div>
  );
}

function AccessPicker({
  value,
  onChange,
  testId,
}: {
  value: ShareAccess;
  onChange: (a: ShareAccess) => void;
  testId: string;
}) {
  return (
    <select aria-label="Access" data-testid={testId} value={value} onChange={(e) => onChange(e.target.value as ShareAccess)}>
      <option value="read">can read</option>
      <option value="write">can write</option>
    </select>
  );
}
