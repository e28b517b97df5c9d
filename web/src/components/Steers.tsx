// Steers this tab sent while an answer streamed, shown below the live answer until the
// server's tree holds them (then they render as ordinary user messages).
import type { Strategy } from "../api";

export interface Steer {
  key: string;
  text: string;
  strategy: Strategy;
  state: "sending" | "queued";
  /** User message ids known when the steer was sent; a new one with this text resolves it. */
  knownUserIds: Set<string>;
}

/** The steers the tree does not show yet (`users`: id and text of its visible user messages). */
export function unresolvedSteers(steers: Steer[], users: ReadonlyArray<readonly [string, string]>): Steer[] {
  return steers.filter(
    (s) =>
      s.state === "sending" ||
      !users.some(([id, text]) => !s.knownUserIds.has(id) && text === s.text.trim()),
  );
}

export function QueuedSteers({ steers }: { steers: Steer[] }) {
  return (
    <>
      {steers.map((s) => (
        <div key={s.key} className="message user queued" data-testid="queued-steer" data-state={s.state}>
          <div className="queued-label">{s.state === "sending" ? "sending…" : `steer · ${s.strategy}`}</div>
          <div className="plain">{s.text}</div>
        </div>
      ))}
    </>
  );
}
