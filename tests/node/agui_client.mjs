// An unmodified AG-UI client (@ag-ui/client's HttpAgent) against a running Drupe.
// Usage: node agui_client.mjs <base-url> <gateway-key>. Prints one JSON object.
import { HttpAgent } from "@ag-ui/client";

const [base, key] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${key}` };
const url = (target) => `${base}/ag-ui/${encodeURIComponent(target)}`;
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

// 3. A client-side tool: its call ends the run; the client's result continues in a new run.
const tools = [
  {
    name: "pick_color",
    description: "Ask the user to pick a colour.",
    parameters: { type: "object", properties: { options: { type: "array" } } },
  },
];
const picker = new HttpAgent({
  url: url('scripted:tool?tool=pick_color&args={"options":["red","blue"]}'),
  headers,
  threadId: "node-agui-tool",
});
picker.addMessage({ id: "p1", role: "user", content: "pick one" });
let pending = null;
const picked = await picker.runAgent({ tools }, {
  onRunFinishedEvent: ({ pendingToolCallIds }) => {
    pending = pendingToolCallIds;
  },
});
const call = picked.newMessages.find((m) => m.role === "assistant" && m.toolCalls?.length)?.toolCalls[0];
picker.addMessage({ id: "t1", role: "tool", toolCallId: call.id, content: "blue" });
const answered = await picker.runAgent({ tools });

// 4. Reasoning, checked by the client's own event verifier.
const thinker = new HttpAgent({ url: url("scripted:reasoning"), headers, threadId: "node-agui-think" });
thinker.addMessage({ id: "r1", role: "user", content: "why" });
const thought = await thinker.runAgent();
const reasoning = thinker.messages.filter((m) => m.role === "reasoning");

// 5. An approval: the run ends interrupted; the next run's resume answers it.
const gated = new HttpAgent({
  url: url('scripted:tool?tool=delete_file&args={"path":"notes.txt"}'),
  headers,
  threadId: "node-agui-approve",
});
gated.addMessage({ id: "g1", role: "user", content: "clean up" });
let interruptOutcome = null;
await gated.runAgent({}, {
  onRunFinishedEvent: (e) => {
    interruptOutcome = e.outcome;
  },
});
const interrupts = gated.pendingInterrupts.map((i) => ({ id: i.id, reason: i.reason }));
const approved = await gated.runAgent({
  resume: interrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload: true })),
});

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
    approval: {
      outcome: interruptOutcome,
      interrupts,
      after: gated.pendingInterrupts.length,
      text: gated.messages.filter((m) => m.role === "assistant").map((m) => m.content ?? "").join(""),
      newMessages: approved.newMessages.length,
    },
    reasoning: {
      text: textOf(thought.newMessages),
      reasoning: reasoning.map((m) => m.content).join(""),
    },
    tool: {
      name: call?.function?.name,
      args: call?.function?.arguments,
      pending,
      callId: call?.id,
      answer: textOf(answered.newMessages),
      toolMessages: picker.messages.filter((m) => m.role === "tool").length,
    },
  }),
);
