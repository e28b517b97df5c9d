import { describe, expect, it } from "vitest";
import { parsePage } from "./route";
import { budget, idList } from "./settingsApi";

describe("settings", () => {
  it("splits scope ids on commas and spaces; blank is no limit", () => {
    expect(idList(" scripted:echo, openai:*  agent_1 ")).toEqual(["scripted:echo", "openai:*", "agent_1"]);
    expect(idList(" , ")).toBeUndefined();
  });
  it("takes a budget as a whole number of at least 1", () => {
    expect(budget(" 30 ", "Requests per minute")).toBe(30);
    expect(budget("", "x")).toBeUndefined();
    expect(() => budget("0", "Requests per minute")).toThrow("Requests per minute must be");
    expect(() => budget("2.5", "Tokens per day")).toThrow("Tokens per day");
  });
  it("routes #/settings to the keys and #/settings/mcp to the MCP servers", () => {
    expect(parsePage("#/settings")).toEqual({ kind: "keys" });
    expect(parsePage("#/settings/keys")).toEqual({ kind: "keys" });
    expect(parsePage("#/settings/mcp")).toEqual({ kind: "mcp" });
    expect(parsePage("#/settings/other")).toBeNull();
  });
});
