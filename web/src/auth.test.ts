import { describe, expect, it } from "vitest";
import { endsSession, guardedInit, isUnsafe, sameOriginPath, signOutRedirect } from "./auth";
import { parsePage } from "./route";
import { newUserBody } from "./usersApi";

const ORIGIN = "http://127.0.0.1:8000";

describe("the CSRF header", () => {
  it("is added to same-origin unsafe requests only", () => {
    const post = guardedInit("/api/conversations", "post", { method: "post" }, undefined, "tok", ORIGIN);
    expect(new Headers(post?.headers).get("x-csrf-token")).toBe("tok");
    const get = guardedInit("/api/conversations", "GET", undefined, undefined, "tok", ORIGIN);
    expect(get).toBeUndefined();
    const other = { method: "POST" };
    expect(guardedInit("https://elsewhere.example/api/x", "POST", other, undefined, "tok", ORIGIN)).toBe(other);
    expect(guardedInit("/api/x", "DELETE", other, undefined, null, ORIGIN)).toBe(other);
  });
  it("keeps the request's own headers", () => {
    const init = { method: "PUT", headers: { "Content-Type": "application/json" } };
    const headers = new Headers(guardedInit(`${ORIGIN}/api/x`, "PUT", init, undefined, "t", ORIGIN)?.headers);
    expect(headers.get("content-type")).toBe("application/json");
    expect(headers.get("x-csrf-token")).toBe("t");
    const fromRequest = new Headers(guardedInit("/api/x", "PATCH", undefined, { "X-A": "1" }, "t", ORIGIN)?.headers);
    expect(fromRequest.get("x-a")).toBe("1");
  });
  it("knows the unsafe methods", () => {
    expect(["POST", "put", "PATCH", "delete"].every(isUnsafe)).toBe(true);
    expect(["GET", "HEAD", "OPTIONS"].some(isUnsafe)).toBe(false);
  });
});

describe("a 401", () => {
  it("ends the session on any /api route but the sign-in", () => {
    expect(endsSession(sameOriginPath("/api/status", ORIGIN))).toBe(true);
    expect(endsSession(sameOriginPath(`${ORIGIN}/api/auth/me`, ORIGIN))).toBe(true);
    expect(endsSession(sameOriginPath("/api/auth/login", ORIGIN))).toBe(false);
    expect(endsSession(sameOriginPath("https://other.example/api/status", ORIGIN))).toBe(false);
    expect(endsSession(sameOriginPath("/v1/chat/completions", ORIGIN))).toBe(false);
  });
});

describe("pages and forms", () => {
  it("routes the tokens and admin pages", () => {
    expect(parsePage("#/tokens")).toEqual({ kind: "tokens" });
    expect(parsePage("#/admin/")).toEqual({ kind: "admin" });
    expect(parsePage("#/administrator")).toBeNull();
  });
  it("leaves empty optional fields out of a new user", () => {
    expect(newUserBody(" carol ", "", "  ", "member")).toEqual({ name: "carol", role: "member" });
    expect(newUserBody("dan", "pw", "d@x.org", "admin")).toEqual({
      name: "dan",
      password: "pw",
      email: "d@x.org",
      role: "admin",
    });
  });
});

describe("the sign-out at the identity provider", () => {
  it("follows an http(s) redirect from the logout's answer, and nothing else", () => {
    const url = "https://id.example.org/session/end?id_token_hint=x&state=y";
    expect(signOutRedirect({ redirect: url })).toBe(url);
    expect(signOutRedirect(undefined)).toBeNull(); // 204: signed out here only
    expect(signOutRedirect({})).toBeNull();
    expect(signOutRedirect({ redirect: "javascript:alert(1)" })).toBeNull();
    expect(signOutRedirect({ redirect: "not a url" })).toBeNull();
    expect(signOutRedirect({ redirect: 42 })).toBeNull();
  });
});
