// One whole chat turn with an unmodified AI SDK client (the `ai` package's DefaultChatTransport):
// submit, stream to the end, then read the stored conversation back over the REST API.
// Usage: node chat_turn.mjs <base-url> <chat-id> <text>. Prints one JSON object.
import { DefaultChatTransport, readUIMessageStream } from "ai";

const [base, chatId, text] = process.argv.slice(2);
const transport = new DefaultChatTransport({ api: `${base}/api/chat` });
const stream = await transport.sendMessages({
  chatId,
  messages: [{ id: "u1", role: "user", parts: [{ type: "text", text }] }],
  trigger: "submit-message",
  messageId: undefined,
  abortSignal: undefined,
  body: {},
});
let message = null;
for await (const m of readUIMessageStream({ stream })) message = m;
const detail = await (await fetch(`${base}/api/conversations/${encodeURIComponent(chatId)}`)).json();
const row = detail.messages.filter((m) => m.role === "assistant").at(-1);
const textOf = (m) => (m?.parts ?? []).filter((p) => p.type === "text").map((p) => p.text).join("");
console.log(
  JSON.stringify({
    text: textOf(message),
    id: message?.id,
    storedId: row?.id,
    storedStatus: row?.status,
    storedText: textOf(row),
    userTexts: detail.messages.filter((m) => m.role === "user").map(textOf),
  }),
);
