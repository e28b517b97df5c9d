// The IM channel part of Drupe's HTTP API (/api/channels): each configured channel's state,
// last error and bound chats. Secrets never reach the browser: the API shows env var NAMES.
import { ApiError, detailFromBody } from "./api";

export interface ChannelChat {
  chatId: string;
  conversationId: string;
  target: string;
}

export interface Channel {
  id: string;
  type: string;
  target: string;
  tokenEnv: string | null;
  secretEnv: string | null;
  allowedUsers: string[];
  allowedChats: string[];
  debounce: number;
  mode: string;
  rateLimit: number;
  headless: boolean;
  state: string;
  lastError: string | null;
  refused: number;
  activeChats: string[];
  deliveryFailures: number;
  chats: ChannelChat[];
}

export async function listChannels(): Promise<Channel[]> {
  const res = await fetch("/api/channels");
  if (!res.ok) throw new ApiError(res.status, detailFromBody(await res.text(), res.status));
  return (await res.json()) as Channel[];
}

/** `#/channels` opens the channels page. */
export const CHANNELS_HASH = "#/channels";

export function isChannelsRoute(hash: string): boolean {
  return hash === CHANNELS_HASH || hash.startsWith(`${CHANNELS_HASH}/`);
}
