// The signed-in user's menu (name and role): settings, personal tokens, the admin page (admins), sign out.
// Not shown when the server runs with auth off.
import { useEffect, useRef, useState } from "react";
import { errorMessage } from "../api";
import { authApi, useAuth } from "../auth";
import { ADMIN_HASH, SETTINGS_HASH, TOKENS_HASH } from "../route";

export function UserMenu() {
  const auth = useAuth();
  const [error, setError] = useState<string | null>(null);
  const menu = useRef<HTMLDetailsElement>(null);
  useEffect(() => {
    // Following one of its links (any hash change), Escape or a click elsewhere closes it.
    const close = () => menu.current?.removeAttribute("open");
    const onKey = (e: KeyboardEvent) => e.key === "Escape" && close();
    const onClick = (e: MouseEvent) => {
      if (menu.current && !menu.current.contains(e.target as Node)) close();
    };
    window.addEventListener("hashchange", close);
    window.addEventListener("keydown", onKey);
    document.addEventListener("click", onClick);
    return () => {
      window.removeEventListener("hashchange", close);
      window.removeEventListener("keydown", onKey);
      document.removeEventListener("click", onClick);
    };
  }, []);
  if (auth.kind !== "signed-in") return null;
  const { user } = auth;
  const signOut = async () => {
    try {
      await authApi.logout();
      window.location.hash = "#/"; // the next user starts from home, not this user's page
    } catch (e) {
      setError(errorMessage(e));
    }
  };
  return (
    <details className="user-menu" data-testid="user-menu" ref={menu}>
      <summary data-testid="user-menu-button" title="Your account">
        <span className="user-name" data-testid="user-name">
          {user.name}
        </span>
        <span className="role-badge" data-testid="user-role" data-role={user.role}>
          {user.role}
        </span>
      </summary>
      <div className="user-menu-items" role="menu">
        <a role="menuitem" href={SETTINGS_HASH} data-testid="menu-settings-link">
          Settings
        </a>
        <a role="menuitem" href={TOKENS_HASH} data-testid="tokens-link">
          Personal tokens
        </a>
        {user.role === "admin" && (
          <a role="menuitem" href={ADMIN_HASH} data-testid="admin-link">
            Users
          </a>
        )}
        <button type="button" role="menuitem" className="ghost" data-testid="sign-out" onClick={signOut}>
          Sign out
        </button>
        {error && <div className="notice error small">{error}</div>}
      </div>
    </details>
  );
}
