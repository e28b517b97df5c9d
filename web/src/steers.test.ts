import { describe, expect, it } from "vitest";
import { type Steer, unresolvedSteers } from "./components/Steers";

const steer = (key: string, text: string, known: string[], state: Steer["state"] = "queued"): Steer => ({
  key,
  text,
  strategy: "enqueue",
  state,
  knownUserIds: new Set(known),
});

describe("unresolvedSteers", () => {
  it("resolves a steer once a new user message with its text is in the tree", () => {
    const list = [steer("s1", "and also this", ["u1"])];
    expect(unresolvedSteers(list, [["u1", "first"]])).toEqual(list);
    expect(unresolvedSteers(list, [["u1", "first"], ["u2", "and also this"]])).toEqual([]);
  });

  it("does not mistake an earlier message with the same text for the steer", () => {
    const list = [steer("s1", "ok", ["u1"])];
    expect(unresolvedSteers(list, [["u1", "ok"]])).toEqual(list);
  });

  it("keeps a steer that is still being sent", () => {
    const list = [steer("s1", "wait", [], "sending")];
    expect(unresolvedSteers(list, [["u9", "wait"]])).toEqual(list);
  });
});
