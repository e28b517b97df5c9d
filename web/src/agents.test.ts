import { describe, expect, it } from "vitest";
import {
  type AgentSession,
  compactionLabel,
  contextUsageText,
  sessionIdOf,
  sessionsByAgent,
  type SessionRuntime,
} from "./agentsApi";

const idle: SessionRuntime = {
  busy: false,
  compacting: false,
  execution: "idle",
  connection: "disconnected",
  pendingFollowUps: [],
  pendingApprovals: [],
  contextUsage: null,
  lastTerminal: null,
  commands: [],
};

function session(id: string, agentId: string): AgentSession {
  return {
    id,
    agentId,
    title: null,
    conversationId: `agent-session:${id}`,
    settings: {},
    status: "idle",
    createdAt: "",
    updatedAt: "",
    runtime: idle,
  };
}

describe("agent sessions", () => {
  it("reads the session id of a session conversation only", () => {
    expect(sessionIdOf("agent-session:sess_1")).toBe("sess_1");
    expect(sessionIdOf("agent-session:")).toBeNull();
    expect(sessionIdOf("c-plain")).toBeNull();
    expect(sessionIdOf(null)).toBeNull();
  });

  it("labels the compaction state", () => {
    expect(compactionLabel(idle).state).toBe("idle");
    expect(compactionLabel({ ...idle, compacting: true })).toEqual({
      state: "compacting",
      label: "compacting context…",
    });
    expect(compactionLabel(null).state).toBe("idle");
  });

  it("describes the context usage a driver reports", () => {
    expect(contextUsageText(null)).toBeNull();
    expect(contextUsageText({ percentage: 41.6 })).toBe("42% of context");
    expect(contextUsageText({ totalTokens: 500, maxTokens: 2000 })).toBe("25% of context");
    expect(contextUsageText({ totalTokens: 500 })).toBe("500 tokens in context");
    expect(contextUsageText({ categories: [] })).toBeNull();
  });

  it("groups sessions by agent, keeping the server's order when activity ties", () => {
    const grouped = sessionsByAgent([session("a", "x"), session("b", "y"), session("c", "x")]);
    expect(grouped.get("x")?.map((s) => s.id)).toEqual(["a", "c"]);
    expect(grouped.get("y")?.map((s) => s.id)).toEqual(["b"]);
  });

  it("sorts by last activity and leaves task sessions out unless open", () => {
    const at = (id: string, when: string, fromTask = false) => ({
      ...session(id, "x"),
      lastActivityAt: when,
      fromTask,
    });
    const sessions = [
      at("old", "2026-12-01T10:00:00+00:00"),
      at("new", "2026-12-03T10:00:00+00:00"),
      at("task", "2026-12-04T10:00:00+00:00", true),
    ];
    expect(sessionsByAgent(sessions).get("x")?.map((s) => s.id)).toEqual(["new", "old"]);
    const open = sessionsByAgent(sessions, sessions[2].conversationId);
    expect(open.get("x")?.map((s) => s.id)).toEqual(["task", "new", "old"]);
  });
});
