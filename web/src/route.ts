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
