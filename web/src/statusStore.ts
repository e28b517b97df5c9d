// Conversation statuses polled from GET /api/status every 2 s (badges for the whole list, and
// the fallback for the open conversation when its event stream is not connected).
import { useEffect, useSyncExternalStore } from "react";
import { ApiError, api, type ConversationStatus } from "./api";

/** `titled`: how many titles the server's title model has set (a change: re-read the list). */
type Snapshot = { statuses: Record<string, ConversationStatus>; tick: number; ok: boolean; titled: number };

let snapshot: Snapshot = { statuses: {}, tick: 0, ok: false, titled: 0 };
const listeners = new Set<() => void>();

function emit(next: Snapshot): void {
  snapshot = next;
  for (const l of listeners) l();
}

export function setStatuses(
  statuses: Record<string, ConversationStatus>,
  ok: boolean,
  titled: number = snapshot.titled,
): void {
  emit({ statuses, tick: snapshot.tick + 1, ok, titled });
}

/** Records a status learnt elsewhere (events, a list reload) without waiting for the poll. */
export function setStatus(id: string, status: ConversationStatus): void {
  if (snapshot.statuses[id] === status) return;
  emit({ ...snapshot, statuses: { ...snapshot.statuses, [id]: status } });
}

function subscribe(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

export function useStatuses(): Snapshot {
  return useSyncExternalStore(subscribe, () => snapshot);
}

/** Polls /api/status while mounted. */
export function useStatusPolling(intervalMs = 2000): void {
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = async () => {
      let wait = intervalMs;
      try {
        const res = await api.status();
        if (!stopped) setStatuses(res.conversations ?? {}, true, res.titled ?? 0);
      } catch (e) {
        if (!stopped && snapshot.ok) emit({ ...snapshot, ok: false });
        // a missing route will not appear soon: ask again rarely
        if (e instanceof ApiError && (e.status === 404 || e.status === 405)) wait = intervalMs * 15;
      }
      if (!stopped) timer = setTimeout(tick, wait);
    };
    void tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [intervalMs]);
}
