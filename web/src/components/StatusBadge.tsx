import type { ConversationStatus } from "../api";

const LABEL: Record<string, string> = {
  idle: "idle",
  pending: "starting",
  streaming: "streaming",
  done: "done",
  aborted: "stopped",
  "awaiting-approval": "needs approval",
  error: "error",
};

export function StatusBadge({ status }: { status: ConversationStatus | null | undefined }) {
  const s = status ?? "idle";
  return (
    <span className={`status-badge status-${s}`} data-testid="status-badge" data-status={s}>
      {LABEL[s] ?? s}
    </span>
  );
}
