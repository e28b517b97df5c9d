// Client side of GET /api/conversations/{id}/events: parses the multiplexed events and folds
// each execution's chunks into a UIMessage with the `ai` package's readUIMessageStream.
import { readUIMessageStream, type UIMessage, type UIMessageChunk } from "ai";
import type { ConversationStatus } from "./api";

export type ConversationEvent =
  | {
      kind: "chunk";
      executionId: string;
      attemptId: number | string;
      seq: number;
      modelId: string | null;
      chunk: UIMessageChunk;
    }
  | { kind: "status"; status: ConversationStatus; turnId: string | null };

/** Parses one `data:` payload; returns null for anything that is not a known event. */
export function parseEvent(data: string): ConversationEvent | null {
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    return null;
  }
  if (!value || typeof value !== "object") return null;
  const v = value as Record<string, unknown>;
  if (v.kind === "status" && typeof v.status === "string") {
    return {
      kind: "status",
      status: v.status as ConversationStatus,
      turnId: typeof v.turnId === "string" ? v.turnId : v.turnId == null ? null : String(v.turnId),
    };
  }
  if (
    v.kind === "chunk" &&
    v.executionId != null &&
    v.chunk &&
    typeof v.chunk === "object" &&
    typeof (v.chunk as { type?: unknown }).type === "string"
  ) {
    return {
      kind: "chunk",
      executionId: String(v.executionId),
      attemptId: (v.attemptId as number | string) ?? 0,
      seq: typeof v.seq === "number" ? v.seq : 0,
      modelId: typeof v.modelId === "string" ? v.modelId : null,
      chunk: v.chunk as UIMessageChunk,
    };
  }
  return null;
}

/** Compares attempt ids, numeric when both are numbers (a stale attempt is lower). */
export function compareAttempts(a: number | string, b: number | string): number {
  const na = Number(a);
  const nb = Number(b);
  if (Number.isFinite(na) && Number.isFinite(nb)) return na - nb;
  return String(a) < String(b) ? -1 : String(a) > String(b) ? 1 : 0;
}

export interface ExecutionView {
  executionId: string;
  attemptId: number | string;
  modelId: string | null;
  message: UIMessage | null;
  errorText: string | null;
  finished: boolean;
}

/** Folds the chunks of one execution attempt; `onUpdate` receives each new snapshot. */
export class ExecutionFolder {
  private controller: ReadableStreamDefaultController<UIMessageChunk> | null = null;
  private closed = false;
  view: ExecutionView;

  constructor(
    executionId: string,
    attemptId: number | string,
    modelId: string | null,
    private readonly onUpdate: (view: ExecutionView) => void,
  ) {
    this.view = { executionId, attemptId, modelId, message: null, errorText: null, finished: false };
    const stream = new ReadableStream<UIMessageChunk>({
      start: (controller) => {
        this.controller = controller;
      },
    });
    void this.consume(stream);
  }

  private async consume(stream: ReadableStream<UIMessageChunk>): Promise<void> {
    try {
      const messages = readUIMessageStream({
        stream,
        onError: (error) => this.update({ errorText: errorText(error) }),
      });
      for await (const message of messages) this.update({ message });
    } catch (error) {
      this.update({ errorText: errorText(error) });
    }
    this.update({ finished: true });
  }

  private update(patch: Partial<ExecutionView>): void {
    this.view = { ...this.view, ...patch };
    this.onUpdate(this.view);
  }

  push(chunk: UIMessageChunk): void {
    if (this.closed || !this.controller) return;
    try {
      this.controller.enqueue(chunk);
    } catch {
      // the fold gave up on this stream (an error was recorded): ignore the rest
      this.closed = true;
      return;
    }
    if (chunk.type === "finish" || chunk.type === "abort") this.close();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.controller?.close();
    } catch {
      // already closed
    }
  }
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
