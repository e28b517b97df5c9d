// An unmodified AI SDK client (the `ai` package's DefaultChatTransport) against a running Drupe:
// submit, stream, disconnect mid-answer and resume with reconnectToStream, stop, resume right
// after the end (the finished answer is replayed), and resume when idle (null). Usage: node chat_transport.mjs <base-url>. Prints one JSON object.
import { DefaultChatTransport, readUIMessageStream } from "ai";

const base = process.argv[2];
const transport = new DefaultChatTransport({ api: `${base}/api/chat` });
const PACED = "scripted:lorem?words=80&rate=150";

function userMessage(id, text) {
  return { id, role: "user", parts: [{ type: "text", text }] };
}

function textOf(message) {
  return (message?.parts ?? [])
    .filter((p) => p.type === "text")
    .map((p) => p.text)
    .join("");
}

async function fold(stream) {
  let last = null;
  for await (const message of readUIMessageStream({ stream })) last = message;
  return last;
}

/** Reads `count` chunks from a chunk stream, then cancels it (a disconnect). */
async function readSome(stream, count) {
  const reader = stream.getReader();
  const seen = [];
  while (seen.length < count) {
    const { value, done } = await reader.read();
    if (done) break;
    seen.push(value);
  }
  await reader.cancel();
  return seen;
}

async function stored(chatId) {
  const res = await fetch(`${base}/api/conversations/${encodeURIComponent(chatId)}`);
  const detail = await res.json();
  return detail.messages.filter((m) => m.role === "assistant").at(-1);
}

const out = {};

// 1. submit and stream to the end
{
  const stream = await transport.sendMessages({
    chatId: "node-submit",
    messages: [userMessage("u1", "hello from node")],
    trigger: "submit-message",
    messageId: undefined,
    abortSignal: undefined,
    body: { models: ["scripted:echo"] },
  });
  const message = await fold(stream);
  const row = await stored("node-submit");
  out.submit = { text: textOf(message), id: message.id, storedId: row.id, storedStatus: row.status };
}

// 2. disconnect mid-answer, then resume with reconnectToStream (replay from `start`, then live)
{
  const stream = await transport.sendMessages({
    chatId: "node-resume",
    messages: [userMessage("u2", "long one")],
    trigger: "submit-message",
    messageId: undefined,
    abortSignal: undefined,
    body: { models: [PACED] },
  });
  const before = await readSome(stream, 5);
  const resumed = await transport.reconnectToStream({ chatId: "node-resume" });
  const message = await fold(resumed);
  const row = await stored("node-resume");
  out.resume = {
    firstChunks: before.map((c) => c.type),
    resumed: resumed !== null,
    id: message.id,
    storedId: row.id,
    words: textOf(message).split(/\s+/).filter(Boolean).length,
    sameAsStored: JSON.stringify(message.parts) === JSON.stringify(row.parts),
  };
}

// 3. stop: POST /api/chat/{id}/stop while the transport's stream is open
{
  const stream = await transport.sendMessages({
    chatId: "node-stop",
    messages: [userMessage("u3", "stop me")],
    trigger: "submit-message",
    messageId: undefined,
    abortSignal: undefined,
    body: { models: ["scripted:lorem?words=500&rate=100"] },
  });
  const chunks = [];
  const reader = stream.getReader();
  let stopped = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    chunks.push(value);
    if (chunks.length === 5) {
      const res = await fetch(`${base}/api/chat/node-stop/stop`, { method: "POST" });
      stopped = await res.json();
    }
  }
  const row = await stored("node-stop");
  out.stop = { stopped, lastChunk: chunks.at(-1)?.type, storedStatus: row.status };
}

// 4. just ended (within the grace period): reconnectToStream replays the finished answer
{
  const again = await transport.reconnectToStream({ chatId: "node-submit" });
  const message = again ? await fold(again) : null;
  const row = await stored("node-submit");
  out.ended = { text: textOf(message), id: message?.id, storedId: row.id };
}

// 5. nothing to resume (a conversation that never answered): null (HTTP 204)
{
  const res = await fetch(`${base}/api/conversations`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ title: "idle" }),
  });
  const created = await res.json();
  out.idle = { resumed: await transport.reconnectToStream({ chatId: created.id }) };
}

console.log(JSON.stringify(out));
