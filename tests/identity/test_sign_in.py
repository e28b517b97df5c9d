"""Sign-in, sign-out, tokens and the gate, against a real server on loopback (issue 20)."""

from __future__ import annotations

import logging
import time

from tests.identity.conftest import PASSWORDS, Site


async def test_an_anonymous_request_gets_401_everywhere_but_health_and_sign_in(site: Site) -> None:
    async with site.client() as anon:
        for path in (
            "/api/conversations",
            "/api/agents",
            "/api/usage",
            "/metrics",
            "/openapi.json",
        ):
            reply = await anon.get(path)
            assert reply.status_code == 401, path
            assert "sign in" in reply.json()["detail"]
            assert reply.headers["www-authenticate"].startswith("Bearer")
        assert (await anon.get("/healthz")).status_code == 200
        assert (await anon.get("/api/auth/methods")).json()["auth"] is True


async def test_a_wrong_password_and_an_unknown_user_get_the_same_answer(site: Site) -> None:
    async with site.client() as anon:
        wrong = await anon.post(
            "/api/auth/login", json={"username": "alice", "password": "nope-nope"}
        )
        unknown = await anon.post(
            "/api/auth/login", json={"username": "nobody", "password": "nope-nope"}
        )
        assert wrong.status_code == unknown.status_code == 401
        assert wrong.json() == unknown.json()
        # The same time: both verify one argon2 hash (an unknown name a dummy one).
        timings = {}
        for name in ("alice", "nobody"):
            start = time.perf_counter()
            for _ in range(3):
                await anon.post("/api/auth/login", json={"username": name, "password": "x" * 9})
            timings[name] = time.perf_counter() - start
        ratio = timings["alice"] / timings["nobody"]
        assert 0.33 < ratio < 3.0, timings  # no order-of-magnitude gap (argon2 dominates)


async def test_sign_in_sets_a_session_cookie_and_sign_out_revokes_it(site: Site) -> None:
    async with site.client(headers={"origin": site.url}) as browser:
        reply = await browser.post(
            "/api/auth/login", json={"username": "alice", "password": PASSWORDS["alice"]}
        )
        assert reply.status_code == 200
        assert reply.json()["user"]["name"] == "alice"
        cookie = reply.headers["set-cookie"]
        assert "drupe_session=" in cookie
        assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Secure" not in cookie
        me = (await browser.get("/api/auth/me")).json()
        assert me["user"]["name"] == "alice" and me["user"]["role"] == "member"
        assert me["via"] == "session" and me["csrfToken"]
        assert (await browser.get("/api/conversations")).status_code == 200
        value = browser.cookies["drupe_session"]
        assert (await browser.post("/api/auth/logout")).status_code == 204
    # The same cookie, replayed after sign-out: refused at once (this node forgot its cache).
    async with site.client(cookies={"drupe_session": value}) as replay:
        refused = await replay.get("/api/conversations")
        assert refused.status_code == 401
        assert "unknown, expired or revoked" in refused.json()["detail"]


async def test_a_personal_token_works_as_bearer_and_stops_when_revoked(site: Site) -> None:
    alice = await site.sign_in("alice")
    made = await alice.post("/api/auth/tokens", json={"name": "script"})
    assert made.status_code == 201
    token = made.json()["token"]
    assert token.startswith("drt_")
    async with site.client(headers={"authorization": f"Bearer {token}"}) as script:
        me = (await script.get("/api/auth/me")).json()
        assert me["user"]["name"] == "alice" and me["via"] == "token"
        # No cookie, no Origin: a bearer token needs no CSRF token.
        created = await script.post("/api/conversations", json={"title": "from a script"})
        assert created.status_code in (200, 201), created.text
        listed = (await alice.get("/api/auth/tokens")).json()["tokens"]
        assert [t["name"] for t in listed] == ["script"]
        assert token not in str(listed)
        assert (await alice.delete(f"/api/auth/tokens/{made.json()['id']}")).status_code == 204
        assert (await script.get("/api/auth/me")).status_code == 401


async def test_a_malformed_authorization_header_says_what_is_wrong(site: Site) -> None:
    async with site.client() as client:
        for header, words in (
            ("Basic abc", "must be 'Bearer <token>'"),
            ("Bearer", "no token after 'Bearer'"),
            ("Bearer a b", "no token after 'Bearer'"),
            ("Bearer " + "x" * 600, "longer than"),
        ):
            reply = await client.get("/api/conversations", headers={"authorization": header})
            assert reply.status_code == 401
            assert words in reply.json()["detail"], header


async def test_a_cookie_request_that_changes_something_needs_the_origin_or_the_csrf_token(
    site: Site,
) -> None:
    alice = await site.sign_in("alice")
    me = (await alice.get("/api/auth/me")).json()
    cookies = {"drupe_session": alice.cookies["drupe_session"]}
    async with site.client(cookies=cookies) as no_origin:
        refused = await no_origin.post("/api/conversations", json={"title": "x"})
        assert refused.status_code == 403
        assert "X-CSRF-Token" in refused.json()["detail"]
        assert (await no_origin.get("/api/conversations")).status_code == 200  # reads pass
        wrong = await no_origin.post(
            "/api/conversations", json={"title": "x"}, headers={"x-csrf-token": "forged"}
        )
        assert wrong.status_code == 403
        right = await no_origin.post(
            "/api/conversations", json={"title": "x"}, headers={"x-csrf-token": me["csrfToken"]}
        )
        assert right.status_code in (200, 201)
    async with site.client(cookies=cookies, headers={"origin": "http://evil.example"}) as evil:
        assert (await evil.post("/api/conversations", json={"title": "x"})).status_code == 403


async def test_failed_sign_ins_are_rate_limited_per_user(site: Site) -> None:
    async with site.client() as attacker:
        for _ in range(5):
            reply = await attacker.post(
                "/api/auth/login", json={"username": "bob", "password": "guess-guess"}
            )
            assert reply.status_code == 401
        blocked = await attacker.post(
            "/api/auth/login", json={"username": "bob", "password": PASSWORDS["bob"]}
        )
        assert blocked.status_code == 429
        assert "too many failed sign-ins" in blocked.json()["detail"]
    # Another user is not blocked by bob's failures (this address is under its own limit).
    await site.sign_in("alice")


async def test_a_disabled_user_is_signed_out_at_once(site: Site) -> None:
    bob = await site.sign_in("bob")
    assert (await bob.get("/api/conversations")).status_code == 200
    await site.runtime.db.users.set_disabled("bob")
    await site.runtime.db.auth_sessions.revoke_user(
        (await site.runtime.db.users.get_by_name("bob")).id  # type: ignore[union-attr]
    )
    assert site.runtime.authenticator is not None
    site.runtime.authenticator.forget_user(
        (await site.runtime.db.users.get_by_name("bob")).id  # type: ignore[union-attr]
    )
    assert (await bob.get("/api/conversations")).status_code == 401
    async with site.client() as anon:
        again = await anon.post(
            "/api/auth/login", json={"username": "bob", "password": PASSWORDS["bob"]}
        )
        assert again.status_code == 401


async def test_no_password_or_token_reaches_the_logs_or_the_audit_log(site: Site) -> None:
    handler_records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            # The server's side (drupe, uvicorn, SQLAlchemy, ...): the test's own HTTP client
            # (httpx, httpcore) logs the headers it received, cookies included.
            if not record.name.startswith(("httpx", "httpcore")):
                handler_records.append(self.format(record))

    keep = Keep(level=logging.DEBUG)
    root = logging.getLogger()
    root.addHandler(keep)
    old_level = root.level
    root.setLevel(logging.DEBUG)
    try:
        alice = await site.sign_in("alice")
        token = (await alice.post("/api/auth/tokens", json={"name": "t"})).json()["token"]
        async with site.client() as anon:
            await anon.post(
                "/api/auth/login", json={"username": "alice", "password": "wrong-one-1"}
            )
            await anon.get("/api/conversations", headers={"authorization": f"Bearer {token}x"})
        cookie = alice.cookies["drupe_session"]
    finally:
        root.removeHandler(keep)
        root.setLevel(old_level)
    secrets = [PASSWORDS["alice"], "wrong-one-1", token, cookie]
    text = "\n".join(handler_records)
    events = await site.runtime.db.audit.list(limit=100)
    audit = repr(events)
    for secret in secrets:
        assert secret not in text
        assert secret not in audit
    actions = [e.action for e in events]
    assert {"auth.login", "auth.login_failed", "token.create"} <= set(actions)
