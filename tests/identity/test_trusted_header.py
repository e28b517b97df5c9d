"""The trusted proxy header (``[auth] trusted_header``): believed only from
``trusted_proxies``, ignored from any other address; a named user is found or created as a
member; a disabled user is refused; a credential of the request's own wins; the CSRF rule of a
browser holds for the header's requests too."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from drupe.api.app_factory import create_app
from drupe.app import Runtime, open_runtime
from drupe.settings import AuthSettings, Settings
from drupe.testing.fake_providers import serve_app
from tests.identity.conftest import PASSWORDS
from tests.identity.test_revocation import DEADLINE, _ended_after

HEADER = "X-Forwarded-User"


@asynccontextmanager
async def _site(tmp_path: Path, proxies: list[str]) -> AsyncIterator[tuple[str, Runtime]]:
    """A server whose [auth] trusts ``HEADER`` from ``proxies`` (sweeping revocations every
    0.5 s), with the users alice and bob; its lifespan runs (the revocation sweep)."""
    config = tmp_path / "config.toml"
    listed = ", ".join(f'"{p}"' for p in proxies)
    config.write_text(
        'default_model = "scripted:echo"\n\n[auth]\n'
        f'trusted_header = "{HEADER}"\ntrusted_proxies = [{listed}]\n'
    )
    settings = Settings(data_dir=tmp_path, config_path=config, auth=AuthSettings(sweep_seconds=0.5))
    async with open_runtime(settings) as runtime:
        await runtime.db.users.create("alice", password=PASSWORDS["alice"])
        await runtime.db.users.create("bob", password=PASSWORDS["bob"])
        app = create_app(runtime)
        async with app.router.lifespan_context(app), serve_app(app) as url:
            yield url, runtime


async def test_the_header_from_a_trusted_proxy_names_the_user(tmp_path: Path) -> None:
    async with (
        _site(tmp_path, ["127.0.0.1/32"]) as (url, runtime),
        httpx.AsyncClient(base_url=url) as proxy,
    ):
        me = await proxy.get("/api/auth/me", headers={HEADER: "alice"})
        assert me.status_code == 200, me.text
        assert me.json()["user"]["name"] == "alice" and me.json()["via"] == "header"
        assert (await proxy.get("/api/auth/me")).status_code == 401  # no header: nobody
        # A real proxy also says whom it serves: the peer (the proxy) is what is trusted, and
        # routes still see the browser's address (X-Forwarded-For from 127.0.0.1, as uvicorn).
        browser = {HEADER: "alice", "x-forwarded-for": "203.0.113.9"}
        assert (await proxy.get("/api/auth/me", headers=browser)).status_code == 200
        failed = await proxy.post(
            "/api/auth/login",
            json={"username": "bob", "password": "wrong-password"},
            headers={"x-forwarded-for": "203.0.113.9"},
        )
        assert failed.status_code == 401
        (event,) = await runtime.db.audit.list(action="auth.login_failed")
        assert event.address == "203.0.113.9"
        new = await proxy.get("/api/auth/me", headers={HEADER: "frank@example.org"})
        assert new.json()["user"] == {
            "id": new.json()["user"]["id"],
            "name": "frank-example.org",
            "role": "member",
        }
        frank = await runtime.db.users.get_by_name("frank-example.org")
        assert frank is not None and frank.email == "frank@example.org"
        # A credential of the request's own wins over the header.
        token, _ = await runtime.db.users.create_token("bob")
        mixed = await proxy.get(
            "/api/auth/me", headers={HEADER: "alice", "authorization": f"Bearer {token}"}
        )
        assert mixed.json()["user"]["name"] == "bob"
        # A browser behind the proxy: a change needs its own Origin (no CSRF token).
        headers = {HEADER: "alice"}
        assert (await proxy.post("/api/auth/tokens", headers=headers)).status_code == 403
        made = await proxy.post("/api/auth/tokens", json={}, headers={**headers, "origin": url})
        assert made.status_code == 201, made.text
        bob = await runtime.db.users.set_disabled("bob")
        assert runtime.authenticator is not None
        runtime.authenticator.forget_user(bob.id)  # as the admin routes do on this node
        assert (await proxy.get("/api/auth/me", headers={HEADER: "bob"})).status_code == 401


async def test_the_header_from_any_other_address_is_ignored(tmp_path: Path) -> None:
    async with _site(tmp_path, ["10.0.0.0/8", "::1/128"]) as (url, runtime):
        async with httpx.AsyncClient(base_url=url) as stranger:  # 127.0.0.1: not a proxy
            me = await stranger.get("/api/auth/me", headers={HEADER: "alice"})
            assert me.status_code == 401
            made = await stranger.get("/api/auth/me", headers={HEADER: "mallory"})
            assert made.status_code == 401
        assert await runtime.db.users.get_by_name("mallory") is None


async def test_disabling_a_header_user_ends_their_open_stream(tmp_path: Path) -> None:
    async with (
        _site(tmp_path, ["127.0.0.1/32"]) as (url, runtime),
        httpx.AsyncClient(base_url=url, timeout=30, headers={HEADER: "alice"}) as proxy,
    ):
        made = await proxy.post("/api/conversations", json={"title": "t"}, headers={"origin": url})
        assert made.status_code == 201, made.text

        async def disable_on_another_node() -> None:
            await runtime.db.users.set_disabled("alice")  # the database only

        took = await _ended_after(proxy, made.json()["id"], disable_on_another_node)
        assert took < DEADLINE, took
        assert (await proxy.get("/api/conversations")).status_code == 401
