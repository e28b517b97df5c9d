import { describe, expect, it } from "vitest";
import { compact, niceScale, shortDay } from "./usage";

describe("niceScale", () => {
  it("rounds the top up to a whole number of 1/2/5 steps", () => {
    expect(niceScale(0)).toEqual({ top: 1, step: 1 });
    expect(niceScale(7)).toEqual({ top: 8, step: 2 });
    expect(niceScale(95)).toEqual({ top: 100, step: 50 });
    expect(niceScale(1234)).toEqual({ top: 1500, step: 500 });
  });
  it("never uses fractional steps for counts", () => {
    expect(niceScale(2)).toEqual({ top: 2, step: 1 });
  });
});

describe("compact", () => {
  it("shortens large counts", () => {
    expect(compact(950)).toBe("950");
    expect(compact(1234)).toBe("1.2k");
    expect(compact(45_000)).toBe("45k");
    expect(compact(2_500_000)).toBe("2.5M");
  });
});

describe("shortDay", () => {
  it("labels UTC days", () => {
    expect(shortDay("2026-03-07")).toBe("Mar 7");
    expect(shortDay("bad")).toBe("bad");
  });
});
