// Side-by-side answers of a multi-model turn: either persisted siblings (from the database) or
// live executions folded from the events endpoint.
import type { UIMessage } from "ai";
import type { ModelInfo } from "../api";
import type { ExecutionView } from "../events";
import { type ApprovalHandlers, MessageParts } from "./MessageParts";

export interface Column {
  key: string;
  status?: string;
  modelId: string | null;
  message: UIMessage | null;
  live: boolean;
  note?: string | null;
  errorText?: string | null;
}

export function columnsFromExecutions(executions: ExecutionView[]): Column[] {
  return executions.map((e) => ({
    key: e.executionId,
    modelId: e.modelId,
    message: e.message,
    live: !e.finished,
    errorText: e.errorText,
  }));
}

export function Columns({
  columns,
  models,
  approvals,
  live,
}: {
  columns: Column[];
  models: ModelInfo[];
  approvals: ApprovalHandlers;
  live: boolean;
}) {
  return (
    <div
      className="multi-model-columns"
      data-testid="multi-model-columns"
      data-live={live ? "true" : "false"}
      role="region"
      aria-label="Answers by model (scrolls sideways on narrow screens)"
      tabIndex={0}
      style={{ gridTemplateColumns: `repeat(${columns.length}, minmax(240px, 1fr))` }}
    >
      {columns.map((c) => (
        <div
          key={c.key}
          className="column message assistant"
          data-testid="message"
          data-role="assistant"
          data-model-id={c.modelId ?? ""}
          data-status={c.status ?? (c.live ? "streaming" : "success")}
          data-message-id={c.message?.id ?? ""}
        >
          <div className="message-model">
            {modelLabel(models, c.modelId)}
            {c.live && <span className="live-dot" aria-label="streaming" />}
            {c.note && <span className="muted small"> · {c.note}</span>}
          </div>
          {c.message ? (
            <MessageParts message={c.message} approvals={approvals} streaming={c.live} />
          ) : (
            <span className="cursor" aria-label="waiting" />
          )}
          {c.errorText && <div className="notice error small">{c.errorText}</div>}
        </div>
      ))}
    </div>
  );
}

export function modelLabel(models: ModelInfo[], modelId: string | null | undefined): string {
  if (!modelId) return "assistant";
  return models.find((m) => m.id === modelId)?.label ?? modelId;
}
