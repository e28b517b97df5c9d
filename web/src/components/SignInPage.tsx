// The sign-in page: user name + password (POST /api/auth/login), and "Sign in with <provider>"
// when GET /api/auth/methods offers single sign-on. The server's refusal is shown as it is
// worded (a wrong password, too many attempts).
import { useEffect, useState } from "react";
import { errorMessage } from "../api";
import { authApi, type SignInMethods } from "../auth";

export function SignInPage({ reason }: { reason: string | null }) {
  const [methods, setMethods] = useState<SignInMethods | null>(null);
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    authApi
      .methods()
      .then(setMethods)
      .catch(() => setMethods(null)); // the password form works without it
  }, []);

  const submit = async (e: React.FormEvent) => {
    e.preventDefault();
    if (!username.trim() || !password) {
      setError("Enter your user name and password.");
      return;
    }
    setBusy(true);
    setError(null);
    try {
      await authApi.login(username.trim(), password);
    } catch (err) {
      setError(errorMessage(err));
      setBusy(false);
    }
  };

  const sso = methods?.oidc ?? null;
  return (
    <main className="sign-in" data-testid="sign-in-page">
      <form className="sign-in-card" onSubmit={submit} aria-labelledby="sign-in-title">
        <h1 id="sign-in-title" className="brand">
          Drupe
        </h1>
        <p className="muted">Sign in to continue.</p>
        {reason && !error && (
          <div className="notice" role="status" data-testid="sign-in-reason">
            {reason}
          </div>
        )}
        <label className="field">
          <span>User name</span>
          <input
            name="username"
            autoComplete="username"
            autoFocus
            data-testid="sign-in-username"
            value={username}
            onChange={(e) => setUsername(e.target.value)}
          />
        </label>
        <label className="field">
          <span>Password</span>
          <input
            name="password"
            type="password"
            autoComplete="current-password"
            data-testid="sign-in-password"
            value={password}
            onChange={(e) => setPassword(e.target.value)}
          />
        </label>
        {error && (
          <div className="notice error" role="alert" data-testid="sign-in-error">
            {error}
          </div>
        )}
        <button type="submit" className="primary" data-testid="sign-in-submit" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
        {sso && (
          <>
            <div className="divider">or</div>
            <button
              type="button"
              data-testid="sign-in-sso"
              onClick={() => window.location.assign(sso.url)}
            >
              Sign in with {sso.name}
            </button>
          </>
        )}
      </form>
    </main>
  );
}
