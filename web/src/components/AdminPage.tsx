// The admin page (`#/admin`, admins only): every user (name, email, role, disabled, created,
// linked chat accounts), a form that creates one, and per user a role picker, Disable / Enable
// and an unlink button per chat account. Each change is sent at once and the list re-read; a
// refusal shows the server's detail.
import { useCallback, useEffect, useState } from "react";
import { errorMessage } from "../api";
import { type Role, useAuth } from "../auth";
import { newUserBody, type UserRow, usersApi } from "../usersApi";

export function AdminPage() {
  const auth = useAuth();
  const isAdmin = auth.kind === "off" || (auth.kind === "signed-in" && auth.user.role === "admin");
  const [users, setUsers] = useState<UserRow[] | null>(null);
  const [error, setError] = useState<string | null>(null);

  const reload = useCallback(async () => {
    try {
      setUsers((await usersApi.list()).items);
    } catch (e) {
      setError(errorMessage(e));
    }
  }, []);
  useEffect(() => {
    if (isAdmin) void reload();
  }, [isAdmin, reload]);

  const change = async (name: string, patch: { role?: Role; disabled?: boolean }) => {
    setError(null);
    try {
      await usersApi.update(name, patch);
    } catch (e) {
      setError(errorMessage(e));
    }
    await reload();
  };

  const unlink = async (name: string, channel: string, platformUserId: string) => {
    setError(null);
    try {
      await usersApi.unlinkChatAccount(name, channel, platformUserId);
    } catch (e) {
      setError(errorMessage(e));
    }
    await reload();
  };

  if (!isAdmin) {
    return (
      <section className="settings-page" data-testid="admin-page">
        <div className="notice error" role="alert">
          Only admins manage users.
        </div>
      </section>
    );
  }
  return (
    <section className="settings-page" data-testid="admin-page">
      <h2>Users</h2>
      <NewUserForm onCreated={reload} onError={setError} />
      {error && (
        <div className="notice error" role="alert" data-testid="admin-error">
          {error}
        </div>
      )}
      {users === null ? (
        <p className="muted">Loading…</p>
      ) : (
        <table className="data-table" data-testid="users-table">
          <thead>
            <tr>
              <th>Name</th>
              <th>Email</th>
              <th>Role</th>
              <th>Created</th>
              <th>Chat accounts</th>
              <th>State</th>
            </tr>
          </thead>
          <tbody>
            {users.map((u) => (
              <tr key={u.id} data-testid="user-row" data-user-name={u.name} data-disabled={String(u.disabled)}>
                <td>{u.name}</td>
                <td>{u.email ?? ""}</td>
                <td>
                  <select
                    aria-label={`Role of ${u.name}`}
                    data-testid="user-role-select"
                    value={u.role}
                    onChange={(e) => void change(u.name, { role: e.target.value as Role })}
                  >
                    <option value="member">member</option>
                    <option value="admin">admin</option>
                  </select>
                </td>
                <td>{new Date(u.createdAt).toLocaleDateString()}</td>
                <td data-testid="user-chat-accounts">
                  {(u.chatAccounts ?? []).map((a) => (
                    <span key={`${a.channel}/${a.platformUserId}`} className="chat-account">
                      <code>
                        {a.channel}:{a.platformUserId}
                      </code>{" "}
                      <button
                        type="button"
                        className="ghost small"
                        aria-label={`Unlink ${a.channel}:${a.platformUserId} from ${u.name}`}
                        data-testid="user-chat-unlink"
                        onClick={() => void unlink(u.name, a.channel, a.platformUserId)}
                      >
                        ×
                      </button>
                    </span>
                  ))}
                </td>
                <td>
                  <button
                    type="button"
                    className={u.disabled ? "small" : "danger small"}
                    data-testid="user-disable"
                    onClick={() => void change(u.name, { disabled: !u.disabled })}
                  >
                    {u.disabled ? "Enable" : "Disable"}
                  </button>
                  {u.disabled && <span className="muted small"> disabled</span>}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function NewUserForm({ onCreated, onError }: { onCreated: () => Promise<void>; onError: (e: string | null) => void }) {
  const [name, setName] = useState("");
  const [password, setPassword] = useState("");
  const [email, setEmail] = useState("");
  const [role, setRole] = useState<Role>("member");
  const submit = async (e: React.FormEvent) => {
    e.preventDefault();
    if (!name.trim()) {
      onError("A user needs a name.");
      return;
    }
    onError(null);
    try {
      await usersApi.create(newUserBody(name, password, email, role));
      setName("");
      setPassword("");
      setEmail("");
      setRole("member");
      await onCreated();
    } catch (err) {
      onError(errorMessage(err));
    }
  };
  return (
    <form className="inline-form" onSubmit={submit} aria-label="New user">
      <input aria-label="Name" placeholder="Name" maxLength={64} data-testid="new-user-name" value={name} onChange={(e) => setName(e.target.value)} />
      <input
        aria-label="Password"
        placeholder="Password (optional)"
        type="password"
        autoComplete="new-password"
        data-testid="new-user-password"
        value={password}
        onChange={(e) => setPassword(e.target.value)}
      />
      <input aria-label="Email" placeholder="Email (optional)" type="email" data-testid="new-user-email" value={email} onChange={(e) => setEmail(e.target.value)} />
      <select aria-label="Role" data-testid="new-user-role" value={role} onChange={(e) => setRole(e.target.value as Role)}>
        <option value="member">member</option>
        <option value="admin">admin</option>
      </select>
      <button type="submit" className="primary" data-testid="create-user">
        Create user
      </button>
    </form>
  );
}
