// Hash routes: `#/` is the home screen, `#/c/<conversation id>` a conversation.

export function parseRoute(hash: string): string | null {
  const m = /^#\/c\/([^/?#]+)/.exec(hash);
  if (!m) return null;
  try {
    return decodeURIComponent(m[1]);
  } catch {
    return m[1];
  }
}

export function conversationHash(id: string | null): string {
  return id ? `#/c/${encodeURIComponent(id)}` : "#/";
}

/** `#/usage`: the usage page. */
export const USAGE_HASH = "#/usage";

export function isUsageRoute(hash: string): boolean {
  return /^#\/usage\/?$/.test(hash);
}
