"""PostgreSQL briefly unavailable in cluster mode: a new admission fails with a 503 that says
so, the answer already streaming goes on for its subscribers, and once PostgreSQL is back its
final row is written and new admissions work again.

The nodes reach PostgreSQL through a TCP relay on loopback that the test cuts (every open
connection dropped, new ones refused) and restores: a real network outage between the nodes and
the database, without touching the shared server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import httpx
import pytest
from sqlalchemy.engine import make_url

from tests.cluster.nodes import cluster_nodes, fresh_database, sse_events, text_of

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

PACED = "scripted:lorem?words=200&rate=40"


class Relay:
    """A TCP relay that can be cut and restored."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.up = True
        self.port = 0
        self._streams: set[anyio.abc.SocketStream] = set()

    async def _pipe(self, source: anyio.abc.SocketStream, sink: anyio.abc.SocketStream) -> None:
        try:
            async for data in source:
                await sink.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            await sink.aclose()

    async def _handle(self, client: anyio.abc.SocketStream) -> None:
        if not self.up:
            await client.aclose()
            return
        try:
            server = await anyio.connect_tcp(*self.target)
        except OSError:
            await client.aclose()
            return
        self._streams |= {client, server}
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._pipe, client, server)
                tg.start_soon(self._pipe, server, client)
        finally:
            self._streams -= {client, server}

    async def cut(self) -> None:
        self.up = False
        for stream in list(self._streams):
            await stream.aclose()

    def restore(self) -> None:
        self.up = True

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Relay]:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, self._handle)
            try:
                yield self
            finally:
                tg.cancel_scope.cancel()


async def test_a_postgres_outage_refuses_admissions_with_503_and_live_answers_finish(
    tmp_path: Path, prefix: str
) -> None:
    async with fresh_database() as direct_url:
        url = make_url(direct_url)
        relay = Relay(url.host or "127.0.0.1", url.port or 5432)
        async with relay.running():
            relayed = url.set(host="127.0.0.1", port=relay.port).render_as_string(
                hide_password=False
            )
            async with (
                cluster_nodes(tmp_path, prefix, database_url=relayed) as (a, b),
                httpx.AsyncClient(base_url=a.url, timeout=60) as on_a,
                httpx.AsyncClient(base_url=b.url, timeout=60) as on_b,
            ):
                body_chunks: list[bytes] = []
                speaking, done = anyio.Event(), anyio.Event()

                async def submit() -> None:
                    body = {
                        "id": "pg1",
                        "trigger": "submit-message",
                        "messages": [
                            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}
                        ],
                        "models": [PACED],
                    }
                    async with on_a.stream("POST", "/api/chat", json=body) as r:
                        async for chunk in r.aiter_bytes():
                            body_chunks.append(chunk)
                            if b"text-delta" in chunk:
                                speaking.set()
                    done.set()

                async with anyio.create_task_group() as tg:
                    tg.start_soon(submit)
                    with anyio.fail_after(20):
                        await speaking.wait()
                    await relay.cut()
                    refused = await on_b.post(
                        "/api/chat",
                        json={
                            "id": "pg2",
                            "trigger": "submit-message",
                            "messages": [
                                {
                                    "id": "u9",
                                    "role": "user",
                                    "parts": [{"type": "text", "text": "x"}],
                                }
                            ],
                        },
                    )
                    assert refused.status_code == 503, refused.text
                    assert "database" in refused.json()["detail"]
                    assert not done.is_set()  # the live answer streams on without the database
                    relay.restore()
                    with anyio.fail_after(30):
                        await done.wait()
                events = sse_events(b"".join(body_chunks))
                assert events[-1][1] == "[DONE]"
                assert not any(isinstance(d, dict) and d.get("type") == "error" for _, d in events)
                streamed = text_of(events)
                # Once PostgreSQL is back, the final row is written (the terminal-write retrier).
                with anyio.fail_after(30):
                    while True:
                        rows = await a.runtime.db.messages.list_for_conversation("pg1")
                        if rows and rows[-1].status != "pending":
                            break
                        await anyio.sleep(0.2)
                answer = rows[-1]
                assert answer.status == "success"
                assert (
                    "".join(p.get("text", "") for p in answer.parts if p["type"] == "text")
                    == streamed
                )
                again = await on_b.post(
                    "/api/chat",
                    json={
                        "id": "pg3",
                        "trigger": "submit-message",
                        "messages": [
                            {"id": "u8", "role": "user", "parts": [{"type": "text", "text": "y"}]}
                        ],
                    },
                )
                assert again.status_code == 200 and b"[DONE]" in again.content
