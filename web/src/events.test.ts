import type { UIMessage, UIMessageChunk } from "ai";
import { describe, expect, it } from "vitest";
import { detailFromBody } from "./api";
import { compareAttempts, ExecutionFolder, type ExecutionView, parseEvent } from "./events";
import { conversationHash, parseRoute } from "./route";
import { findToolCall, injectKnownToolCalls, type KnownToolCall } from "./transport";

describe("parseEvent", () => {
  it("reads chunk and status events", () => {
    const chunk = { type: "text-delta", id: "t", delta: "hi" };
    expect(parseEvent(JSON.stringify({ kind: "chunk", executionId: "x1", attemptId: 4, seq: 2, modelId: "m:a", chunk }))).toEqual({
      kind: "chunk",
      executionId: "x1",
      attemptId: 4,
      seq: 2,
      modelId: "m:a",
      chunk,
    });
    expect(parseEvent('{"kind":"status","status":"streaming","turnId":"t1"}')).toEqual({ kind: "status", status: "streaming", turnId: "t1" });
  });

  it("ignores malformed or unknown events", () => {
    expect(parseEvent("[DONE]")).toBeNull();
    expect(parseEvent('{"kind":"chunk","executionId":"x"}')).toBeNull();
    expect(parseEvent('{"kind":"other"}')).toBeNull();
    expect(parseEvent("null")).toBeNull();
  });
});

describe("compareAttempts", () => {
  it("orders numeric attempt ids numerically", () => {
    expect(compareAttempts(9, 10)).toBeLessThan(0);
    expect(compareAttempts("10", 9)).toBeGreaterThan(0);
    expect(compareAttempts(3, 3)).toBe(0);
  });
});

describe("ExecutionFolder", () => {
  it("folds one execution's chunks with readUIMessageStream", async () => {
    const views: ExecutionView[] = [];
    let finished!: () => void;
    const done = new Promise<void>((resolve) => (finished = resolve));
    const folder = new ExecutionFolder("x1", 1, "m:a", (v) => {
      views.push(v);
      if (v.finished) finished();
    });
    const chunks: UIMessageChunk[] = [
      { type: "start", messageId: "a1" },
      { type: "start-step" },
      { type: "reasoning-start", id: "r" },
      { type: "reasoning-delta", id: "r", delta: "hmm" },
      { type: "reasoning-end", id: "r" },
      { type: "text-start", id: "t" },
      { type: "text-delta", id: "t", delta: "Hello " },
      { type: "text-delta", id: "t", delta: "world" },
      { type: "text-end", id: "t" },
      { type: "finish-step" },
      { type: "finish" },
    ];
    for (const c of chunks) folder.push(c);
    await done;
    const last = views[views.length - 1];
    expect(last.finished).toBe(true);
    expect(last.message?.id).toBe("a1");
    const parts = last.message?.parts ?? [];
    expect(parts.find((p) => p.type === "reasoning")).toMatchObject({ text: "hmm", state: "done" });
    expect(parts.find((p) => p.type === "text")).toMatchObject({ text: "Hello world", state: "done" });
  });
});

describe("detailFromBody", () => {
  it("reads FastAPI errors and falls back to the text", () => {
    expect(detailFromBody('{"detail":"conversation is busy"}', 409)).toBe("conversation is busy");
    expect(detailFromBody('{"detail":[{"loc":["body","id"],"msg":"field required"}]}', 422)).toBe("field required");
    expect(detailFromBody("", 500)).toBe("HTTP 500");
    expect(detailFromBody("plain failure")).toBe("plain failure");
  });
});

describe("routes", () => {
  it("round-trips conversation ids through the hash", () => {
    for (const id of ["c-1", "agent-session:abc", "with space/slash"]) {
      expect(parseRoute(conversationHash(id))).toBe(id);
    }
    expect(parseRoute("#/")).toBeNull();
    expect(parseRoute("")).toBeNull();
    expect(conversationHash(null)).toBe("#/");
  });
});

describe("injectKnownToolCalls", () => {
  async function run(chunks: UIMessageChunk[], known: Record<string, KnownToolCall>): Promise<UIMessageChunk[]> {
    const source = new ReadableStream<UIMessageChunk>({
      start(controller) {
        for (const c of chunks) controller.enqueue(c);
        controller.close();
      },
    });
    const out: UIMessageChunk[] = [];
    const reader = source.pipeThrough(injectKnownToolCalls((id) => known[id])).getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return out;
      out.push(value);
    }
  }
  const known = { "call-1": { toolName: "get_weather", input: { city: "Paris" }, dynamic: false } };

  it("re-creates a tool call a continuation refers to", async () => {
    const out = await run(
      [{ type: "start", messageId: "a1" }, { type: "tool-output-available", toolCallId: "call-1", output: 21 }],
      known,
    );
    expect(out.map((c) => c.type)).toEqual(["start", "tool-input-available", "tool-output-available"]);
    expect(out[1]).toMatchObject({ toolCallId: "call-1", toolName: "get_weather", input: { city: "Paris" } });
  });

  it("leaves replayed tool calls and unknown ids alone", async () => {
    const replay: UIMessageChunk[] = [
      { type: "tool-input-available", toolCallId: "call-1", toolName: "get_weather", input: { city: "Paris" } },
      { type: "tool-output-available", toolCallId: "call-1", output: 21 },
      { type: "tool-output-available", toolCallId: "call-9", output: 1 },
    ];
    expect(await run(replay, known)).toEqual(replay);
  });

  it("finds tool calls in the messages a tab shows", () => {
    const messages: UIMessage[] = [
      {
        id: "a1",
        role: "assistant",
        parts: [{ type: "tool-get_weather", toolCallId: "call-1", state: "input-available", input: { city: "Paris" } }],
      },
    ];
    expect(findToolCall(messages, "call-1")).toEqual(known["call-1"]);
    expect(findToolCall(messages, "nope")).toBeUndefined();
  });
});
