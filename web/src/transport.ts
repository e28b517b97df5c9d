// The chat transport: DefaultChatTransport sending only the last user message (the server
// builds history from its own tree) plus Drupe's options, and making resumed streams foldable
// from scratch (see injectKnownToolCalls).
import { DefaultChatTransport, isToolUIPart, type UIMessage, type UIMessageChunk } from "ai";
import { lastUserMessage } from "./tree";

export interface KnownToolCall {
  toolName: string;
  input: unknown;
  dynamic: boolean;
}

const CREATES = new Set(["tool-input-start", "tool-input-available", "tool-input-error"]);
const NEEDS = new Set([
  "tool-approval-request",
  "tool-output-available",
  "tool-output-error",
  "tool-output-denied",
]);

/**
 * A resumed stream is folded from an empty message. When it continues a tool call that an
 * earlier stream made (the continuation after an approval), its first reference to that call
 * would fail ("no tool invocation found"). This inserts a `tool-input-available` chunk for such
 * calls, taken from the message this tab already shows; calls the stream itself replays pass
 * through untouched.
 */
export function injectKnownToolCalls(
  lookup: (toolCallId: string) => KnownToolCall | undefined,
): TransformStream<UIMessageChunk, UIMessageChunk> {
  const seen = new Set<string>();
  return new TransformStream({
    transform(chunk, controller) {
      const toolCallId = (chunk as { toolCallId?: unknown }).toolCallId;
      if (typeof toolCallId === "string") {
        if (CREATES.has(chunk.type)) {
          seen.add(toolCallId);
        } else if (NEEDS.has(chunk.type) && !seen.has(toolCallId)) {
          const known = lookup(toolCallId);
          if (known) {
            controller.enqueue({
              type: "tool-input-available",
              toolCallId,
              toolName: known.toolName,
              input: known.input,
              ...(known.dynamic ? { dynamic: true } : {}),
            } as UIMessageChunk);
          }
          seen.add(toolCallId);
        }
      }
      controller.enqueue(chunk);
    },
  });
}

/** Finds a tool call among messages (newest first). */
export function findToolCall(messages: UIMessage[], toolCallId: string): KnownToolCall | undefined {
  for (let i = messages.length - 1; i >= 0; i--) {
    for (const part of messages[i].parts) {
      if (isToolUIPart(part) && part.toolCallId === toolCallId) {
        const dynamic = part.type === "dynamic-tool";
        const toolName = dynamic ? part.toolName : part.type.slice("tool-".length);
        return { toolName, input: part.input, dynamic };
      }
    }
  }
  return undefined;
}

export class DrupeChatTransport extends DefaultChatTransport<UIMessage> {
  constructor(private readonly currentMessages: () => UIMessage[]) {
    super({
      api: "/api/chat",
      prepareSendMessagesRequest: ({ id, messages, trigger, messageId, body }) => {
        const last = lastUserMessage(messages);
        return { body: { ...(body ?? {}), id, messages: last ? [last] : [], trigger, messageId } };
      },
    });
  }

  override async reconnectToStream(
    options: Parameters<DefaultChatTransport<UIMessage>["reconnectToStream"]>[0],
  ): Promise<ReadableStream<UIMessageChunk> | null> {
    const stream = await super.reconnectToStream(options);
    if (!stream) return null;
    return stream.pipeThrough(
      injectKnownToolCalls((toolCallId) => findToolCall(this.currentMessages(), toolCallId)),
    );
  }
}
