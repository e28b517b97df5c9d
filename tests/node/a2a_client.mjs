// An unmodified A2A client (@a2a-js/sdk's ClientFactory over JSON-RPC) against a running Drupe.
// Usage: node a2a_client.mjs <base-url> <gateway-key> <echo-agent-id> <slow-agent-id>.
// Prints one JSON object.
import {
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";

const [base, key, echoAgent, slowAgent] = process.argv.slice(2);
const authFetch = (url, init = {}) => {
  const headers = new Headers(init.headers ?? {});
  headers.set("Authorization", `Bearer ${key}`);
  return fetch(url, { ...init, headers });
};
const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch })],
  }),
);
const message = (text, extra = {}) => ({
  message: {
    messageId: `m-${Math.random().toString(36).slice(2)}`,
    role: 1, // ROLE_USER
    parts: [{ content: { $case: "text", value: text } }],
    ...extra,
  },
});
const textOfParts = (parts) => parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");
const artifactText = (task) => (task.artifacts ?? []).map((a) => textOfParts(a.parts)).join("");

// Rebuild a task from a stream the way the spec says: artifact append / replace, status.
class Rebuilt {
  task = null;
  updates = 0;
  apply(event) {
    const p = event.payload;
    if (p.$case === "task") {
      this.task = structuredClone(p.value);
      this.task.artifacts = this.task.artifacts ?? [];
      return;
    }
    this.updates += 1;
    if (p.$case === "artifactUpdate") {
      const { artifact, append } = p.value;
      const existing = this.task.artifacts.find((a) => a.artifactId === artifact.artifactId);
      if (append && existing) existing.parts.push(...artifact.parts);
      else if (existing) existing.parts = [...artifact.parts];
      else this.task.artifacts.push(structuredClone(artifact));
    } else if (p.$case === "statusUpdate") {
      this.task.status = p.value.status;
    }
  }
  get text() {
    return artifactText(this.task);
  }
}

const echo = await factory.createFromUrl(`${base}/a2a/${echoAgent}/`);
const card = await echo.getAgentCard();

// 1. stream, then get.
const streamed = new Rebuilt();
for await (const event of echo.sendMessageStream(message("hello from js"))) streamed.apply(event);
const got = await echo.getTask({ id: streamed.task.id });

// 2. re-subscribe mid-stream.
const slow = await factory.createFromUrl(`${base}/a2a/${slowAgent}/`);
const first = new Rebuilt();
for await (const event of slow.sendMessageStream(message("write"))) {
  first.apply(event);
  if (first.updates === 4) break;
}
const again = new Rebuilt();
for await (const event of slow.resubscribeTask({ id: first.task.id })) again.apply(event);
const resumed = await slow.getTask({ id: first.task.id });

// 3. a steer, then cancel.
const working = new Rebuilt();
let steered = null;
let canceled = null;
for await (const event of slow.sendMessageStream(message("write again"))) {
  working.apply(event);
  if (working.updates === 3 && steered === null) {
    const steer = new Rebuilt();
    const request = message("also cats", { taskId: working.task.id, contextId: working.task.contextId });
    for await (const e of slow.sendMessageStream(request)) {
      steer.apply(e);
      if (steer.updates === 2) break;
    }
    steered = { id: steer.task.id, state: steer.task.status?.state };
    canceled = await slow.cancelTask({ id: working.task.id });
  }
}
const canceledTask = await slow.getTask({ id: working.task.id });

console.log(
  JSON.stringify({
    card: { name: card.name, streaming: card.capabilities?.streaming },
    stream: {
      text: streamed.text,
      state: streamed.task.status?.state,
      gotText: artifactText(got),
      id: streamed.task.id,
    },
    resubscribe: {
      firstText: first.text,
      text: again.text,
      storedText: artifactText(resumed),
      state: again.task.status?.state,
      id: first.task.id,
    },
    steer: {
      taskId: working.task.id,
      steered,
      canceledState: canceled?.status?.state,
      streamState: working.task.status?.state,
      text: working.text,
      storedText: artifactText(canceledTask),
    },
  }),
);
