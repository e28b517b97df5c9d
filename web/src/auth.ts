// Who is signed in: the session store, the sign-in routes, and the fetch guard.
//
// Contract:
// - `loadSession()` asks GET /api/auth/me once at start: 200 with `auth: false` is "off" (the
//   server runs --no-auth: no sign-in UI), 200 otherwise "signed-in" (with the session's CSRF
//   token), 401 "signed-out".
// - `installFetchGuard()` wraps `window.fetch` once: every same-origin unsafe request (POST,
//   PUT, PATCH, DELETE) carries `X-CSRF-Token` while a session has one, and a 401 from any
//   same-origin /api route (but the sign-in itself) while signed in returns to "signed-out".
//   It covers every caller, the AI SDK's transport included (it reads `globalThis.fetch` per
//   request).
// - The pure helpers below hold the rules; the store is a tiny external store for React.
import { useSyncExternalStore } from "react";
import { ApiError, request } from "./api";

export type Role = "admin" | "member";

export interface AuthUser {
  id: string;
  name: string;
  role: Role;
  email?: string | null;
}

export type AuthState =
  | { kind: "loading" }
  | { kind: "off"; user: AuthUser }
  | { kind: "signed-out"; reason: string | null }
  | { kind: "signed-in"; user: AuthUser; csrfToken: string | null }
  | { kind: "error"; message: string };

export interface SignInMethods {
  auth: boolean;
  password: boolean;
  oidc: { name: string; url: string } | null;
}

/** An IM account the user linked to themselves (`/link <code>` in the chat). */
export interface ChatAccount {
  channel: string;
  platformUserId: string;
  linkedAt: string;
}

export interface ChatAccounts {
  accounts: ChatAccount[];
  /** The channels this server runs (where a code can be sent), with what to type before the
   * code there (`/link`; on Slack its slash command, e.g. `/drupe link`). */
  channels: { id: string; type: string; linkCommand: string }[];
}

export interface LinkCode {
  code: string;
  /** What to send to the bot: `/link <code>`. */
  command: string;
  expiresAt: string;
}

export interface PersonalToken {
  id: string;
  name: string;
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
  revoked: boolean;
}

const UNSAFE = new Set(["POST", "PUT", "PATCH", "DELETE"]);

export function isUnsafe(method: string): boolean {
  return UNSAFE.has(method.toUpperCase());
}

/** The path of `url` when it is on `origin` (relative URLs are), else null. */
export function sameOriginPath(url: string, origin: string): string | null {
  try {
    const parsed = new URL(url, origin);
    return parsed.origin === origin ? parsed.pathname : null;
  } catch {
    return null;
  }
}

/** Whether a 401 on `path` means the session is gone (a wrong password at sign-in does not). */
export function endsSession(path: string | null): boolean {
  return path !== null && path.startsWith("/api/") && path !== "/api/auth/login";
}

/** `init` with the CSRF header added when the request is same-origin and unsafe. */
export function guardedInit(
  url: string,
  method: string,
  init: RequestInit | undefined,
  baseHeaders: HeadersInit | undefined,
  csrfToken: string | null,
  origin: string,
): RequestInit | undefined {
  if (!csrfToken || !isUnsafe(method) || sameOriginPath(url, origin) === null) return init;
  const headers = new Headers(init?.headers ?? baseHeaders);
  headers.set("X-CSRF-Token", csrfToken);
  return { ...init, headers };
}

let state: AuthState = { kind: "loading" };
const listeners = new Set<() => void>();

export function setAuth(next: AuthState): void {
  state = next;
  for (const l of listeners) l();
}

export function authState(): AuthState {
  return state;
}

function subscribe(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

export function useAuth(): AuthState {
  return useSyncExternalStore(subscribe, () => state);
}

function csrfToken(): string | null {
  return state.kind === "signed-in" ? state.csrfToken : null;
}

let installed = false;

export function installFetchGuard(): void {
  if (installed) return;
  installed = true;
  const original = window.fetch.bind(window);
  window.fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const req = input instanceof Request ? input : null;
    const url = req ? req.url : input instanceof URL ? input.href : String(input);
    const method = init?.method ?? req?.method ?? "GET";
    const origin = window.location.origin;
    const next = guardedInit(url, method, init, req?.headers, csrfToken(), origin);
    const response = await original(input, next);
    if (response.status === 401 && state.kind === "signed-in" && endsSession(sameOriginPath(url, origin))) {
      setAuth({ kind: "signed-out", reason: "Your session has ended: sign in again." });
    }
    return response;
  };
}

interface MeAnswer {
  user: AuthUser;
  csrfToken: string | null;
  auth: boolean;
}

/** Reads GET /api/auth/me into the store (see the contract above). */
export async function loadSession(): Promise<void> {
  try {
    const me = await request<MeAnswer>("GET", "/api/auth/me");
    setAuth(me.auth ? { kind: "signed-in", user: me.user, csrfToken: me.csrfToken } : { kind: "off", user: me.user });
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) setAuth({ kind: "signed-out", reason: null });
    else setAuth({ kind: "error", message: e instanceof Error ? e.message : String(e) });
  }
}

/** Where the browser signs out at the identity provider, from the logout's answer (an http(s)
 * URL only; anything else is ignored, so the sign-out stays local). */
export function signOutRedirect(answer: { redirect?: unknown } | undefined): string | null {
  const target = answer?.redirect;
  if (typeof target !== "string") return null;
  try {
    const url = new URL(target);
    return url.protocol === "https:" || url.protocol === "http:" ? url.toString() : null;
  } catch {
    return null;
  }
}

export const authApi = {
  methods(): Promise<SignInMethods> {
    return request("GET", "/api/auth/methods");
  },
  /** Signs in; the store holds the user and the session's CSRF token. Throws the server's detail. */
  async login(username: string, password: string): Promise<void> {
    const answer = await request<{ user: AuthUser; csrfToken: string }>("POST", "/api/auth/login", {
      username,
      password,
    });
    setAuth({ kind: "signed-in", user: answer.user, csrfToken: answer.csrfToken });
  },
  /** Ends the session on the server (the cookie is cleared) and returns to the sign-in page.
   * A session from single sign-on also ends at the provider: the server answers where, and the
   * browser goes there (the provider sends it back to Drupe's sign-in). */
  async logout(): Promise<void> {
    let redirect: string | null = null;
    try {
      const answer = await request<{ redirect?: string } | undefined>("POST", "/api/auth/logout");
      redirect = signOutRedirect(answer);
    } finally {
      setAuth({ kind: "signed-out", reason: null });
    }
    if (redirect !== null) window.location.assign(redirect);
  },
  listTokens(): Promise<{ tokens: PersonalToken[] }> {
    return request("GET", "/api/auth/tokens");
  },
  createToken(name: string): Promise<{ id: string; name: string; token: string }> {
    return request("POST", "/api/auth/tokens", { name });
  },
  revokeToken(id: string): Promise<void> {
    return request("DELETE", `/api/auth/tokens/${encodeURIComponent(id)}`);
  },
  listChatAccounts(): Promise<ChatAccounts> {
    return request("GET", "/api/auth/chat-accounts");
  },
  makeLinkCode(): Promise<LinkCode> {
    return request("POST", "/api/auth/chat-accounts/code");
  },
  unlinkChatAccount(account: ChatAccount): Promise<void> {
    return request(
      "DELETE",
      `/api/auth/chat-accounts/${encodeURIComponent(account.channel)}/${encodeURIComponent(account.platformUserId)}`,
    );
  },
};
