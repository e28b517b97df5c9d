import { describe, expect, it } from "vitest";
import { attachmentProblem, formatBytes } from "./attachments";

describe("attachment checks", () => {
  it("accepts files within the budget, alone and together", () => {
    expect(attachmentProblem([{ name: "a.png", size: 1000 }], 0, 1000)).toBeNull();
    expect(attachmentProblem([{ name: "a", size: 400 }, { name: "b", size: 500 }], 100, 1000)).toBeNull();
  });
  it("names the file that is too big and the limit", () => {
    expect(attachmentProblem([{ name: "big.bin", size: 3 * 1024 * 1024 }], 0, 1536 * 1024)).toBe(
      "big.bin is 3.0 MB: files can be at most 1.5 MB.",
    );
  });
  it("refuses a total over the budget", () => {
    expect(attachmentProblem([{ name: "b", size: 600 }], 500, 1000)).toMatch(/at most 1000 bytes/);
  });
  it("formats sizes", () => {
    expect(formatBytes(12)).toBe("12 bytes");
    expect(formatBytes(2048)).toBe("2 KB");
    expect(formatBytes(Math.floor(1.49 * 1024 * 1024))).toBe("1.4 MB");
  });
});
