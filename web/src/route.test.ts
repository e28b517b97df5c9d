import { describe, expect, it } from "vitest";
import { messageHash, parseFocus, parseRoute } from "./route";

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
