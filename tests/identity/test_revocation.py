"""Revocation reaches open streams: a disabled user's, a signed-out session's and a revoked
token's SSE streams end within the sweep interval, even when the change was made elsewhere
(another node: only the shared database changed, this node's caches were not told)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import anyio
import httpx
import pytest

from drupe.api.app_factory import create_app
from drupe.app import Runtime, open_runtime
from drupe.settings import AuthSettings
from drupe.testing.loopback import serve_app
from tests.identity.conftest import PASSWORDS, auth_settings

SWEEP = 0.5
DEADLINE = 5.0


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[str, Runtime]]:
    settings = auth_settings(tmp_path)
    settings = replace(settings, auth=AuthSettings(sweep_seconds=SWEEP))
    async with open_runtime(settings) as runtime:
        await runtime.db.users.create("alice", password=PASSWORDS["alice"])
        app = create_app(runtime)
        async with app.router.lifespan_context(app), serve_app(app) as url:
            yield url, runtime


async def _open_events(client: httpx.AsyncClient, conversation_id: str) -> float:
    """Read the events stream until the server ends it; the seconds it stayed open."""
    start = time.monotonic()
    async with client.stream("GET", f"/api/conversations/{conversation_id}/events") as reply:
        assert reply.status_code == 200
        async for _ in reply.aiter_bytes():
            pass
    return time.monotonic() - start


async def _ended_after(client: httpx.AsyncClient, conversation_id: str, revoke: object) -> float:
    elapsed: list[float] = []
    ended = anyio.Event()

    async def watch() -> None:
        elapsed.append(await _open_events(client, conversation_id))
        ended.set()

    with anyio.fail_after(DEADLINE + 5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            await anyio.sleep(1.0)  # the stream is open and idle
            revoked_at = time.monotonic()
            await revoke()  # type: ignore[operator]
            await ended.wait()
    return time.monotonic() - revoked_at


@asynccontextmanager
async def _signed_in(url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=url, timeout=30, headers={"origin": url}) as client:
        reply = await client.post(
            "/api/auth/login", json={"username": "alice", "password": PASSWORDS["alice"]}
        )
        assert reply.status_code == 200
        yield client


async def test_disabling_a_user_elsewhere_ends_their_open_stream(
    served: tuple[str, Runtime],
) -> None:
    url, runtime = served
    async with _signed_in(url) as alice:
        conversation = (await alice.post("/api/conversations", json={"title": "t"})).json()

        async def disable_on_another_node() -> None:
            await runtime.db.users.set_disabled("alice")  # the database only

        took = await _ended_after(alice, conversation["id"], disable_on_another_node)
        assert took < DEADLINE, took
        assert (await alice.get("/api/conversations")).status_code == 401


async def test_signing_out_in_the_database_ends_the_sessions_stream(
    served: tuple[str, Runtime],
) -> None:
    url, runtime = served
    async with _signed_in(url) as alice:
        conversation = (await alice.post("/api/conversations", json={"title": "t"})).json()
        user = await runtime.db.users.get_by_name("alice")
        assert user is not None

        async def revoke_sessions() -> None:
            await runtime.db.auth_sessions.revoke_user(user.id)

        took = await _ended_after(alice, conversation["id"], revoke_sessions)
        assert took < DEADLINE, took


async def test_a_revoked_tokens_stream_ends_and_a_live_one_stays(
    served: tuple[str, Runtime],
) -> None:
    url, runtime = served
    kept, _ = await runtime.db.users.create_token("alice", "kept")
    dropped, record = await runtime.db.users.create_token("alice", "dropped")
    async with (
        httpx.AsyncClient(
            base_url=url, timeout=30, headers={"authorization": f"Bearer {kept}"}
        ) as keeper,
        httpx.AsyncClient(
            base_url=url, timeout=30, headers={"authorization": f"Bearer {dropped}"}
        ) as goner,
    ):
        conversation = (await keeper.post("/api/conversations", json={"title": "t"})).json()
        still_open = anyio.Event()
        ended_early: list[float] = []

        async def keep_watching() -> None:
            with anyio.move_on_after(DEADLINE):
                ended_early.append(await _open_events(keeper, conversation["id"]))
            still_open.set()

        async def revoke() -> None:
            await runtime.db.users.revoke_token(record.id)

        async with anyio.create_task_group() as tg:
            tg.start_soon(keep_watching)
            took = await _ended_after(goner, conversation["id"], revoke)
            await still_open.wait()
        assert took < DEADLINE, took
        assert ended_early == []  # the live token's stream was not touched
