// Hash routes: `#/` is the home screen, `#/c/<conversation id>` a conversation (`?m=<message id>`
// scrolls to one message),
// `#/schedules` the scheduled tasks, `#/usage` the usage page, `#/trace/<conversation id>` a
// conversation's trace, `#/tokens` one's personal tokens, `#/admin` the users (admins),
// `#/settings` (= `#/settings/keys`) the gateway keys, `#/settings/mcp` the MCP servers,
// `#/settings/providers` the providers & models (admins), `#/settings/chat-accounts` the IM
// accounts one linked to oneself.

function decoded(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

export function parseRoute(hash: string): string | null {
  const m = /^#\/c\/([^/?#]+)/.exec(hash);
  return m ? decoded(m[1]) : null;
}

export type Page =
  | { kind: "schedules" }
  | { kind: "usage" }
  | { kind: "tokens" }
  | { kind: "admin" }
  | { kind: "keys" }
  | { kind: "mcp" }
  | { kind: "providers" }
  | { kind: "chat-accounts" }
  | { kind: "trace"; conversationId: string }
  | null;

/** The non-conversation page a hash names, if any. */
export function parsePage(hash: string): Page {
  if (/^#\/schedules\/?$/.test(hash)) return { kind: "schedules" };
  if (isUsageRoute(hash)) return { kind: "usage" };
  if (/^#\/tokens\/?$/.test(hash)) return { kind: "tokens" };
  if (/^#\/admin\/?$/.test(hash)) return { kind: "admin" };
  if (/^#\/settings(\/keys)?\/?$/.test(hash)) return { kind: "keys" };
  if (/^#\/settings\/mcp\/?$/.test(hash)) return { kind: "mcp" };
  if (/^#\/settings\/providers\/?$/.test(hash)) return { kind: "providers" };
  if (/^#\/settings\/chat-accounts\/?$/.test(hash)) return { kind: "chat-accounts" };
  const m = /^#\/trace\/([^/?#]+)/.exec(hash);
  return m ? { kind: "trace", conversationId: decoded(m[1]) } : null;
}

export function conversationHash(id: string | null): string {
  return id ? `#/c/${encodeURIComponent(id)}` : "#/";
}

/** `#/c/<conversation>?m=<message>`: a conversation scrolled to one of its messages. */
export function messageHash(conversationId: string, messageId: string | null): string {
  const base = conversationHash(conversationId);
  return messageId ? `${base}?m=${encodeURIComponent(messageId)}` : base;
}

/** The message a conversation hash asks to show (`?m=`), if any. */
export function parseFocus(hash: string): string | null {
  const m = /^#\/c\/[^/?#]+\?(?:.*&)?m=([^&#]+)/.exec(hash);
  return m ? decoded(m[1]) : null;
}

export function traceHash(id: string): string {
  return `#/trace/${encodeURIComponent(id)}`;
}

/** `#/usage`: the usage page. */
export const USAGE_HASH = "#/usage";

export function isUsageRoute(hash: string): boolean {
  return /^#\/usage\/?$/.test(hash);
}

/** `#/tokens`: the signed-in user's personal tokens. */
export const TOKENS_HASH = "#/tokens";

/** `#/settings/chat-accounts`: the IM accounts the signed-in user linked to themselves. */
export const CHAT_ACCOUNTS_HASH = "#/settings/chat-accounts";

/** `#/admin`: the users (admins only). */
export const ADMIN_HASH = "#/admin";

/** `#/settings`: the settings pages (gateway keys first). */
export const SETTINGS_HASH = "#/settings";
export const KEYS_HASH = "#/settings/keys";
export const MCP_HASH = "#/settings/mcp";
export const PROVIDERS_HASH = "#/settings/providers";
