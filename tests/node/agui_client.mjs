// An unmodified AG-UI client (@ag-ui/client's HttpAgent) against a running Drupe.
// Usage: node agui_client.mjs <base-url> <gateway-key>. Prints one JSON object.
import { HttpAgent } from "@ag-ui/client";

const [base, key] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${key}` };
const url = (target) => `${base}/ag-ui/${target.replace("?", "%3F").replaceAll("&", "%26").replaceAll("=", "%3D")}`;
const textOf = (messages) =>
  messages.filter((m) => m.role === "assistant").map((m) => m.content ?? "").join("");
const stored = async (thread) =>
  (await (await fetch(`${base}/api/conversations/${encodeURIComponent(thread)}`)).json()).messages;
const storedText = (row) => row.parts.filter((p) => p.type === "text").map((p) => p.text).join("");

// 1. A text turn, then a second turn in the same thread.
const agent = new HttpAgent({ url: url("scripted:echo"), headers, threadId: "node-agui-1" });
agent.addMessage({ id: "u1", role: "user", content: "hello from ag-ui" });
const first = await agent.runAgent();
agent.addMessage({ id: "u2", role: "user", content: "and again" });
const second = await agent.runAgent();
const rows = await stored("node-agui-1");

// 2. A stop while the answer streams: Drupe's stop route; the run ends cancelled.
const slow = new HttpAgent({
  url: url("scripted:lorem?words=400&rate=40"),
  headers,
  threadId: "node-agui-stop",
});
slow.addMessage({ id: "s1", role: "user", content: "write a lot" });
let outcome = null;
let contents = 0;
let stopped = null;
await slow.runAgent({}, {
  onTextMessageContentEvent: async () => {
    contents += 1;
    if (contents === 3) {
      stopped = await (await fetch(`${base}/api/chat/node-agui-stop/stop`, { method: "POST" })).json();
    }
  },
  onRunFinishedEvent: ({ outcome: o }) => {
    outcome = o;
  },
});
const stopRows = await stored("node-agui-stop");

console.log(
  JSON.stringify({
    first: { text: textOf(first.newMessages), id: first.newMessages.at(-1)?.id },
    second: { text: textOf(second.newMessages) },
    storedIds: rows.filter((m) => m.role === "assistant").map((m) => m.id),
    storedTexts: rows.filter((m) => m.role === "assistant").map(storedText),
    stop: {
      stopped,
      outcome,
      text: textOf(slow.messages),
      storedText: storedText(stopRows.at(-1)),
      storedStatus: stopRows.at(-1).status,
    },
  }),
);
