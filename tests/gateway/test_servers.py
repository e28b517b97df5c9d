"""The HTTP-level behaviour of an SSE response on BOTH ASGI servers (uvicorn, granian).

Real servers on loopback (``live_servers.serving``), the real ``DrupeApp``, ``SseResponse`` and
``FrameBuffer``, a real HTTP client. Per server: frames pushed after the endpoint returned
reach the client in order and the response ends on close (the hand-off); an idle response is
pinged; a client that goes away is noticed while the response is idle (``on_close`` runs once,
the buffer is marked disconnected); a live answer of the real runtime streams to ``[DONE]``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from drupe.api.app_factory import DrupeApp, create_app
from drupe.app import Runtime
from drupe.http.ping_ticker import PING_FRAME
from drupe.http.sse_response import SseResponse
from drupe.streaming.listeners.sse import FrameBuffer
from drupe.streaming.manager import ExecutionSpec, SendInput
from tests.gateway.live_servers import SERVERS, serving

pytestmark = pytest.mark.parametrize("server", SERVERS)


class _Route:
    def __init__(self, ping_after: float | None = None) -> None:
        self.buffer = FrameBuffer()
        self.closed: list[bool] = []
        self.ping_after = ping_after
        self.opened = anyio.Event()
        self.gone = anyio.Event()

    def on_close(self) -> None:
        self.closed.append(True)
        self.gone.set()


def _app(route: _Route) -> DrupeApp:
    app = DrupeApp()

    @app.get("/api/stream")
    async def stream() -> SseResponse:
        route.opened.set()
        return SseResponse(route.buffer, on_close=route.on_close, ping_after=route.ping_after)

    return app


async def test_frames_pushed_after_the_endpoint_returned_stream_in_order(server: str) -> None:
    route = _Route()
    async with serving(_app(route), server) as url, httpx.AsyncClient(base_url=url) as client:
        with anyio.fail_after(10):
            async with client.stream("GET", "/api/stream") as response:
                assert response.headers["content-type"].startswith("text/event-stream")
                await route.opened.wait()
                for n in range(3):
                    route.buffer.push(b"data: %d\n\n" % n)
                route.buffer.close()
                body = b"".join([part async for part in response.aiter_bytes()])
    assert body == b"data: 0\n\ndata: 1\n\ndata: 2\n\n"
    assert route.closed == [True]


async def test_an_idle_response_is_pinged_and_a_gone_client_is_noticed(server: str) -> None:
    route = _Route(ping_after=0.05)
    async with serving(_app(route), server) as url, httpx.AsyncClient(base_url=url) as client:
        with anyio.fail_after(10):
            async with client.stream("GET", "/api/stream") as response:
                parts = response.aiter_bytes()
                assert await anext(parts) == PING_FRAME
            # The client closed its connection; nothing more is pushed: the watch sees it.
            await route.gone.wait()
        await anyio.sleep(0.2)
    assert route.closed == [True]
    assert route.buffer.disconnected


async def _deltas(gate: anyio.Event) -> AsyncIterator[dict[str, Any]]:
    await gate.wait()
    yield {"type": "start", "messageId": "m1"}
    yield {"type": "text-start", "id": "t1"}
    for word in ("one ", "two ", "three"):
        yield {"type": "text-delta", "id": "t1", "delta": word}
    yield {"type": "text-end", "id": "t1"}
    yield {"type": "finish"}


async def test_a_live_answer_streams_to_done(server: str, runtime: Runtime) -> None:
    gate = anyio.Event()
    runtime.manager.send(
        SendInput(
            conversation_id="c1",
            executions=[ExecutionSpec(model_id="test", source=lambda: _deltas(gate))],
            persistent=False,
        )
    )
    app = create_app(runtime)
    async with serving(app, server) as url, httpx.AsyncClient(base_url=url) as client:
        with anyio.fail_after(10):
            async with client.stream("GET", "/api/chat/c1/stream") as response:
                assert response.status_code == 200
                gate.set()
                body = b"".join([part async for part in response.aiter_bytes()])
    text = body.decode()
    assert text.index('"one "') < text.index('"two "') < text.index('"three"')
    assert text.rstrip().endswith("data: [DONE]")
