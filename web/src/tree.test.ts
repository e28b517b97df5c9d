import type { UIMessage } from "ai";
import { describe, expect, it } from "vitest";
import type { ServerMessage } from "./api";
import {
  arrangeForDisplay,
  branchSiblings,
  currentPath,
  groupForDisplay,
  hasPendingAnswer,
  infoById,
  isPlaceholder,
  lastUserMessage,
  mergeLocalLive,
  toUIMessages,
  trailingAnswer,
  visibleMessages,
} from "./tree";

let clock = 0;
function msg(
  id: string,
  parentId: string | null,
  role: "user" | "assistant",
  extra: Partial<ServerMessage> = {},
): ServerMessage {
  clock += 1;
  return {
    id,
    parentId,
    role,
    parts: [{ type: "text", text: `text of ${id}` }],
    status: "success",
    modelId: role === "assistant" ? "scripted:echo" : null,
    siblingsGroupId: null,
    createdAt: new Date(clock * 1000).toISOString(),
    metadata: null,
    ...extra,
  };
}
const ids = (ms: { id: string }[]) => ms.map((m) => m.id);

describe("currentPath", () => {
  it("is empty for an empty tree", () => {
    expect(currentPath([])).toEqual([]);
  });

  it("follows the latest branch from the root", () => {
    // u1 -> a1 ; regenerate: u1 -> a1b ; then u2 under a1b
    const tree = [msg("u1", null, "user"), msg("a1", "u1", "assistant"), msg("a1b", "u1", "assistant"), msg("u2", "a1b", "user"), msg("a2", "u2", "assistant")];
    expect(ids(currentPath(tree))).toEqual(["u1", "a1b", "u2", "a2"]);
  });

  it("switches to an older branch when its newest message is the latest", () => {
    const tree = [msg("u1", null, "user"), msg("a1", "u1", "assistant"), msg("u2", "a1", "user"), msg("a2", "u2", "assistant"), msg("a1b", "u1", "assistant")];
    expect(ids(currentPath(tree))).toEqual(["u1", "a1b"]);
  });

  it("stops at an unknown parent and survives a cycle", () => {
    expect(ids(currentPath([msg("u1", "gone", "user"), msg("a1", "u1", "assistant")]))).toEqual(["u1", "a1"]);
    const a = msg("a", "b", "user");
    const b = msg("b", "a", "assistant");
    expect(ids(currentPath([a, b]))).toEqual(["a", "b"]);
  });
});

describe("visibleMessages and placeholders", () => {
  it("expands a multi-model answer to all its siblings", () => {
    const tree = [
      msg("u1", null, "user"),
      msg("a1", "u1", "assistant", { siblingsGroupId: 1, modelId: "m:a" }),
      msg("a2", "u1", "assistant", { siblingsGroupId: 1, modelId: "m:b" }),
      msg("u2", "a2", "user"),
    ];
    expect(ids(visibleMessages(tree))).toEqual(["u1", "a1", "a2", "u2"]);
  });

  it("keeps a pending answer in place as an empty placeholder (DB parts are not rendered)", () => {
    const tree = [
      msg("u1", null, "user"),
      msg("a1", "u1", "assistant", { status: "pending", parts: [{ type: "text", text: "partial" }] }),
      msg("s1", "a1", "user"),
    ];
    expect(hasPendingAnswer(tree)).toBe(true);
    const ui = toUIMessages(visibleMessages(tree));
    expect(ids(ui)).toEqual(["u1", "a1", "s1"]);
    expect(isPlaceholder(ui[1])).toBe(true);
    expect(ui[1].parts).toEqual([]);
    expect(isPlaceholder(ui[0])).toBe(false);
  });

  it("reports no pending answer once everything settled", () => {
    expect(hasPendingAnswer([msg("u1", null, "user"), msg("a1", "u1", "assistant", { status: "paused" })])).toBe(false);
  });
});

describe("groupForDisplay", () => {
  it("groups consecutive siblings of one multi-model answer into columns", () => {
    const tree = [
      msg("u1", null, "user"),
      msg("a1", "u1", "assistant", { siblingsGroupId: 7 }),
      msg("a2", "u1", "assistant", { siblingsGroupId: 7 }),
      msg("u2", "a1", "user"),
      msg("a3", "u2", "assistant", { siblingsGroupId: 8 }),
    ];
    const items = groupForDisplay(toUIMessages(visibleMessages(tree)), infoById(tree));
    expect(items.map((i) => (i.kind === "group" ? ids(i.messages) : i.kind === "single" ? i.message.id : i.kind))).toEqual([
      "u1",
      ["a1", "a2"],
      "u2",
      "a3", // a group of one is a plain message
    ]);
  });
});

describe("arrangeForDisplay", () => {
  const tree = [msg("u1", null, "user"), msg("a1", "u1", "assistant", { status: "pending" }), msg("s1", "a1", "user")];
  const info = infoById(tree);
  const live: UIMessage = { id: "stream-msg", role: "assistant", parts: [{ type: "text", text: "live" }] };

  it("puts a live answer with a new id where its placeholder was", () => {
    const items = arrangeForDisplay([...toUIMessages(visibleMessages(tree)), live], info, false);
    expect(items.map((i) => (i.kind === "single" ? i.message.id : i.kind))).toEqual(["u1", "stream-msg", "s1"]);
    expect(items[1]).toMatchObject({ kind: "single", standInFor: "a1" });
  });

  it("keeps the placeholder while nothing streams yet, and a same-id stream replaces it in place", () => {
    const ui = toUIMessages(visibleMessages(tree));
    const waiting = arrangeForDisplay(ui, info, false);
    expect(waiting.map((i) => (i.kind === "single" ? i.message.id : i.kind))).toEqual(["u1", "a1", "s1"]);
    const replaced = ui.map((m) => (m.id === "a1" ? { ...live, id: "a1" } : m));
    const items = arrangeForDisplay(replaced, info, false);
    expect(items[1]).toMatchObject({ kind: "single", message: { id: "a1", parts: [{ type: "text", text: "live" }] } });
  });

  it("appends a live answer that has no placeholder (a fresh submit)", () => {
    const done = [msg("u1", null, "user"), msg("a1", "u1", "assistant")];
    const mine: UIMessage = { id: "local-user", role: "user", parts: [{ type: "text", text: "q" }] };
    const items = arrangeForDisplay([...toUIMessages(done), mine, live], infoById(done), false);
    expect(items.map((i) => (i.kind === "single" ? i.message.id : i.kind))).toEqual(["u1", "a1", "local-user", "stream-msg"]);
  });

  it("replaces placeholders and useChat's live copy by live columns for a multi-model turn", () => {
    const multi = [
      msg("u1", null, "user"),
      msg("a1", "u1", "assistant", { status: "pending", siblingsGroupId: 3 }),
      msg("a2", "u1", "assistant", { status: "pending", siblingsGroupId: 3 }),
    ];
    const items = arrangeForDisplay([...toUIMessages(visibleMessages(multi)), live], infoById(multi), true);
    expect(items.map((i) => (i.kind === "single" ? i.message.id : i.kind))).toEqual(["u1", "live-columns"]);
  });
});

describe("regenerate helpers", () => {
  it("finds the trailing answer, all columns of a multi-model one, and never a placeholder", () => {
    const single = [msg("u1", null, "user"), msg("a1", "u1", "assistant")];
    expect(ids(trailingAnswer(toUIMessages(single), infoById(single)))).toEqual(["a1"]);

    const multi = [msg("u1", null, "user"), msg("a1", "u1", "assistant", { siblingsGroupId: 2 }), msg("a2", "u1", "assistant", { siblingsGroupId: 2 })];
    expect(ids(trailingAnswer(toUIMessages(multi), infoById(multi)))).toEqual(["a1", "a2"]);

    const pending = [msg("u1", null, "user"), msg("a1", "u1", "assistant", { status: "pending" })];
    expect(trailingAnswer(toUIMessages(pending), infoById(pending))).toEqual([]);

    const unanswered = [msg("u1", null, "user")];
    expect(trailingAnswer(toUIMessages(unanswered), infoById(unanswered))).toEqual([]);
  });

  it("finds the last user message", () => {
    const ui = toUIMessages([msg("u1", null, "user"), msg("a1", "u1", "assistant"), msg("u2", "a1", "user"), msg("a2", "u2", "assistant")]);
    expect(lastUserMessage(ui)?.id).toBe("u2");
    expect(lastUserMessage([])).toBeUndefined();
  });
});

describe("mergeLocalLive", () => {
  const tree = [msg("u1", null, "user"), msg("a1", "u1", "assistant", { status: "pending" })];
  const fromTree = toUIMessages(visibleMessages(tree));
  const streamed: UIMessage = { id: "a1", role: "assistant", parts: [{ type: "text", text: "so far" }] };
  const elsewhere: UIMessage = { id: "s-9", role: "assistant", parts: [{ type: "text", text: "so far" }] };

  it("keeps what this tab streamed for a still-pending answer", () => {
    expect(mergeLocalLive(fromTree, [fromTree[0], streamed], new Map())[1]).toBe(streamed);
    const merged = mergeLocalLive(fromTree, [fromTree[0], elsewhere], new Map());
    expect(ids(merged)).toEqual(["u1", "a1", "s-9"]);
    expect(arrangeForDisplay(merged, infoById(tree), false).map((i) => (i.kind === "single" ? i.message.id : i.kind))).toEqual(["u1", "s-9"]);
  });

  it("drops local copies once the tree has the settled answer", () => {
    const settled = [msg("u1", null, "user"), msg("a1", "u1", "assistant")];
    const merged = mergeLocalLive(toUIMessages(settled), [fromTree[0], elsewhere], new Map());
    expect(ids(merged)).toEqual(["u1", "a1"]);
    expect(merged[1].parts).toEqual(settled[1].parts);
  });
});

describe("arrangeForDisplay with live columns", () => {
  it("hides every answer of the live multi-model turn, finished siblings included", () => {
    const multi = [
      msg("u1", null, "user"),
      msg("a1", "u1", "assistant", { status: "pending", siblingsGroupId: 4 }),
      msg("a2", "u1", "assistant", { status: "success", siblingsGroupId: 4 }),
    ];
    const ui = toUIMessages(visibleMessages(multi));
    // the resumed stream replaced a1's placeholder in place
    const resumed = ui.map((m) => (m.id === "a1" ? { id: "a1", role: "assistant" as const, parts: [{ type: "text" as const, text: "live" }] } : m));
    const items = arrangeForDisplay(resumed, infoById(multi), true);
    expect(items.map((i) => (i.kind === "single" ? i.message.id : i.kind))).toEqual(["u1", "live-columns"]);
  });

  it("keeps earlier turns' columns", () => {
    const tree = [
      msg("u1", null, "user"),
      msg("a1", "u1", "assistant", { siblingsGroupId: 1 }),
      msg("a2", "u1", "assistant", { siblingsGroupId: 1 }),
      msg("u2", "a2", "user"),
      msg("b1", "u2", "assistant", { status: "pending", siblingsGroupId: 2 }),
      msg("b2", "u2", "assistant", { status: "pending", siblingsGroupId: 2 }),
    ];
    const items = arrangeForDisplay(toUIMessages(visibleMessages(tree)), infoById(tree), true);
    expect(items.map((i) => (i.kind === "single" ? i.message.id : i.kind === "group" ? ids(i.messages) : i.kind))).toEqual([
      "u1",
      ["a1", "a2"],
      "u2",
      "live-columns",
    ]);
  });
});

describe("branches", () => {
  const tree = [
    msg("u1", null, "user"),
    msg("a1", "u1", "assistant"),
    msg("u2", "a1", "user"),
    msg("a2", "u2", "assistant"),
    msg("u3", "a1", "user"),
    msg("a3", "u3", "assistant"),
    msg("g1", "u3", "assistant", { siblingsGroupId: 7 }),
  ];
  it("follows the chosen leaf, else the newest message", () => {
    expect(currentPath(tree, "a2").map((m) => m.id)).toEqual(["u1", "a1", "u2", "a2"]);
    expect(currentPath(tree).map((m) => m.id)).toEqual(["u1", "a1", "u3", "g1"]);
    expect(currentPath(tree, "unknown").map((m) => m.id)).toEqual(["u1", "a1", "u3", "g1"]);
  });
  it("lists edits and regenerations as siblings, not multi-model columns", () => {
    expect(branchSiblings(tree[2], tree)).toEqual({ ids: ["u2", "u3"], index: 0 });
    expect(branchSiblings(tree[4], tree)).toEqual({ ids: ["u2", "u3"], index: 1 });
    expect(branchSiblings(tree[5], tree)).toEqual({ ids: ["a3"], index: 0 });
    expect(branchSiblings(tree[6], tree)).toEqual({ ids: ["g1"], index: 0 });
  });
});
