import { describe, expect, it } from "vitest";
import { CHAT_ACCOUNTS_HASH, messageHash, parseFocus, parsePage, parseRoute } from "./route";

describe("message links", () => {
  it("round-trips a conversation and a message through the hash", () => {
    const hash = messageHash("conv a", "msg/1");
    expect(hash).toBe("#/c/conv%20a?m=msg%2F1");
    expect(parseRoute(hash)).toBe("conv a");
    expect(parseFocus(hash)).toBe("msg/1");
  });
  it("has no focus without ?m= or outside a conversation", () => {
    expect(messageHash("c1", null)).toBe("#/c/c1");
    expect(parseFocus("#/c/c1")).toBeNull();
    expect(parseFocus("#/trace/c1?m=x")).toBeNull();
  });
});

describe("settings pages", () => {
  it("names the chat accounts page, and nothing close to it", () => {
    expect(parsePage(CHAT_ACCOUNTS_HASH)).toEqual({ kind: "chat-accounts" });
    expect(parsePage("#/settings/chat-accounts/")).toEqual({ kind: "chat-accounts" });
    expect(parsePage("#/settings/chat-accountsX")).toBeNull();
    expect(parsePage("#/settings/providers")).toEqual({ kind: "providers" });
  });
});
