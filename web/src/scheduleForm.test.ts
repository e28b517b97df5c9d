import { describe, expect, it } from "vitest";
import { fieldOfError, formatTargets, parseTargets } from "./scheduleForm";

describe("schedule form helpers", () => {
  it("puts a server message under the field it names", () => {
    expect(fieldOfError("trigger.expr: invalid cron expression: Bad minute")).toBe("expr");
    expect(fieldOfError("trigger.timezone must be an IANA time zone name")).toBe("timezone");
    expect(fieldOfError("trigger.seconds must be between 60 and 31536000")).toBe("minutes");
    expect(fieldOfError("timeoutMinutes: must be 0 or more")).toBe("timeout");
    expect(fieldOfError("body.name: String should have at least 1 character")).toBe("name");
    expect(fieldOfError("unknown agent 'x'")).toBe("agent");
    expect(fieldOfError("something else")).toBe("form");
  });
  it("reads and writes channel:chat targets", () => {
    expect(parseTargets(" tg:123 , slack:C42:thread ")).toEqual([
      { channel: "tg", chat: "123" },
      { channel: "slack", chat: "C42:thread" },
    ]);
    expect(parseTargets("")).toEqual([]);
    expect(parseTargets("oops")).toBe('"oops" is not channel:chat');
    expect(formatTargets([{ channel: "tg", chat: "1" }])).toBe("tg:1");
  });
});
