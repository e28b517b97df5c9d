"""Two real runtimes in cluster mode (one PostgreSQL database, one Redis), each behind its own
uvicorn: a stream on node A shows on node B's ``/api/status``, its conversation list badge and
its multiplexed event stream."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import asyncpg
import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from sqlalchemy.engine import make_url

from drupe.api.app_factory import create_app
from drupe.app import Runtime, open_runtime
from drupe.settings import AuthSettings, ClusterSettings, Settings
from tests.cluster.conftest import redis_url
from tests.gateway.sse import Event, chat_body, iter_events

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

DEFAULT_POSTGRES_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
SLOW_MODEL = "scripted:lorem?words=5000&rate=20"  # live until it is stopped
TERMINAL = {"done", "aborted", "error"}


@pytest.fixture
async def database_url() -> AsyncIterator[str]:
    """A PostgreSQL database of its own, shared by the test's nodes, dropped afterwards."""
    url = make_url(os.environ.get("DRUPE_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL))
    name = f"drupe_cluster_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(url.set(drivername="postgresql").render_as_string(False))
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield url.set(drivername="postgresql+asyncpg", database=name).render_as_string(False)
        finally:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


def node_settings(tmp_path: Path, node_id: str, database_url: str, prefix: str) -> Settings:
    data = tmp_path / node_id
    data.mkdir()
    config = data / "config.toml"
    config.write_text('default_model = "scripted:echo"\n')
    return Settings(
        auth=AuthSettings(enabled=False),  # --no-auth on loopback: not about sign-in
        data_dir=data,
        config_path=config,
        database_url=database_url,
        cluster=ClusterSettings(redis_url=redis_url(), node_id=node_id, key_prefix=prefix),
    )


@asynccontextmanager
async def serve(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """``app`` on a real uvicorn (a socket bound before it starts), and a client for it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, lifespan="off", log_level="warning", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: server.serve(sockets=[sock]))
            try:
                async with httpx.AsyncClient(
                    base_url=f"http://127.0.0.1:{port}", timeout=30
                ) as client:
                    yield client
            finally:
                server.should_exit = True
    finally:
        sock.close()


async def next_status(events: AsyncIterator[Event], wanted: set[str]) -> list[str]:
    """The statuses read until one in ``wanted`` (chunk events skipped)."""
    statuses: list[str] = []
    with anyio.fail_after(30):
        async for event in events:
            if event.json["kind"] == "status":
                statuses.append(event.json["status"])
                if statuses[-1] in wanted:
                    return statuses
    raise AssertionError(f"the event stream ended after {statuses}")


async def test_a_stream_on_one_node_shows_on_the_other_nodes_status_list_and_events(
    tmp_path: Path, database_url: str, prefix: str, redis: Any
) -> None:
    async with AsyncExitStack() as stack:
        runtimes: list[Runtime] = []
        for node_id in ("a", "b"):  # one after the other: the first one migrates
            settings = node_settings(tmp_path, node_id, database_url, prefix)
            runtimes.append(await stack.enter_async_context(open_runtime(settings)))
        node_a, node_b = runtimes
        http_a = await stack.enter_async_context(serve(create_app(node_a)))
        http_b = await stack.enter_async_context(serve(create_app(node_b)))
        await node_a.db.conversations.create("c-x")

        assert (await http_b.get("/api/status")).json()["node"] == {"mode": "cluster", "id": "b"}
        async with http_b.stream("GET", "/api/conversations/c-x/events") as watch:
            events = iter_events(watch)
            assert await next_status(events, {"idle"}) == ["idle"]
            body = chat_body("c-x", "go", models=[SLOW_MODEL])
            async with http_a.stream("POST", "/api/chat", json=body) as answer:
                assert answer.status_code == 200
                # B learns of A's stream through Redis only: nothing is live on B.
                assert await next_status(events, {"streaming"}) == ["pending", "streaming"]
                assert not node_b.manager.is_live("c-x") and node_a.manager.is_live("c-x")
                status_b = (await http_b.get("/api/status")).json()
                assert status_b["conversations"] == {"c-x": "streaming"}
                assert status_b["liveStreams"] == 0  # B's own streams: none
                listing = (await http_b.get("/api/conversations")).json()["items"]
                assert [(c["id"], c["status"]) for c in listing] == [("c-x", "streaming")]

                stop = await http_a.post("/api/chat/c-x/stop")
                assert stop.status_code == 200
                ended = await next_status(events, TERMINAL)
        truth = node_a.manager.status("c-x")
        assert truth is not None and truth.status in TERMINAL
        assert ended == [truth.status]
        assert (await http_b.get("/api/status")).json()["conversations"] == {"c-x": truth.status}
        listing = (await http_b.get("/api/conversations")).json()["items"]
        assert [(c["id"], c["status"]) for c in listing] == [("c-x", truth.status)]
