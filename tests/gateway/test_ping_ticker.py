"""``PingTicker``: one task pings every idle SSE connection of an app; ``SseResponse`` uses the
app's ticker when its lifespan runs one (and forgets its buffer when the connection ends), else
times its own pings.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
from fastapi import FastAPI

from drupe.api.app_factory import create_app
from drupe.app import Runtime
from drupe.http.ping_ticker import PING_INTERVAL, PingTicker, ticker_of
from drupe.http.sse_response import SseResponse
from drupe.streaming.listeners.sse import PING_FRAME, FrameBuffer
from tests.gateway.conftest import runtime, settings
from tests.gateway.test_sse_response import SCOPE, _Peer

__all__ = ["runtime", "settings"]


def test_a_buffer_idle_for_a_whole_tick_gets_one_ping_and_a_written_one_none() -> None:
    ticker = PingTicker(interval=1.0)
    idle, busy = FrameBuffer(), FrameBuffer()
    ticker.add(idle)
    ticker.add(busy)
    busy.push(b"data: 1\n\n")
    assert busy.take() == b"data: 1\n\n"  # a write since it was added
    assert ticker.tick() == 1
    assert idle.take() == PING_FRAME
    assert busy.take() == b""
    # The ping itself was a write: the next tick leaves both alone, the one after pings both.
    assert ticker.tick() == 1  # busy wrote nothing since the previous tick
    assert busy.take() == PING_FRAME and idle.take() == b""
    assert ticker.tick() == 1
    assert idle.take() == PING_FRAME
    ticker.discard(idle)
    ticker.discard(idle)  # idempotent
    assert len(ticker) == 1
    ticker.tick()
    assert idle.take() == b"", "a discarded buffer gets no ping"


def test_a_closed_buffer_takes_no_ping() -> None:
    ticker = PingTicker(interval=1.0)
    buffer = FrameBuffer()
    ticker.add(buffer)
    buffer.close()
    ticker.tick()
    assert buffer.take() == b""


async def test_an_sse_response_is_pinged_by_the_apps_ticker_and_leaves_it_on_disconnect() -> None:
    buffer = FrameBuffer()
    closed: list[bool] = []
    peer = _Peer()
    response = SseResponse(buffer, on_close=lambda: closed.append(True), ping_after=0.01)
    with anyio.fail_after(5):
        async with PingTicker(interval=0.01) as ticker:
            scope: dict[str, Any] = {**SCOPE, "app": SimpleNamespace(state=SimpleNamespace())}
            scope["app"].state.ping_ticker = ticker
            assert ticker_of(scope) is ticker
            async with anyio.create_task_group() as tg:
                tg.start_soon(response, scope, peer.receive, peer.send)
                await peer.body_seen.wait()
                assert len(ticker) == 1, "the connection is the ticker's while it is open"
                peer.gone.set()
            assert len(ticker) == 0, "a closed connection leaves the ticker"
    assert set(peer.bodies()) == {PING_FRAME}
    assert closed == [True]


async def test_a_response_with_another_interval_times_its_own_pings() -> None:
    buffer = FrameBuffer()
    peer = _Peer()
    response = SseResponse(buffer, on_close=lambda: None, ping_after=0.01)
    with anyio.fail_after(5):
        async with PingTicker(interval=3600) as ticker:
            scope: dict[str, Any] = {**SCOPE, "app": SimpleNamespace(state=SimpleNamespace())}
            scope["app"].state.ping_ticker = ticker
            async with anyio.create_task_group() as tg:
                tg.start_soon(response, scope, peer.receive, peer.send)
                await peer.body_seen.wait()  # pinged within 5 s: not by the hourly ticker
                assert len(ticker) == 0
                peer.gone.set()
    assert peer.bodies()[0] == PING_FRAME


async def test_the_apps_lifespan_runs_one_ticker_for_its_whole_life(runtime: Runtime) -> None:
    app: FastAPI = create_app(runtime)
    assert app.state.ping_ticker is None
    with anyio.fail_after(5):
        async with app.router.lifespan_context(app):
            ticker = app.state.ping_ticker
            assert isinstance(ticker, PingTicker)
            assert ticker.interval == PING_INTERVAL
            assert ticker_of({"app": app}) is ticker
        assert app.state.ping_ticker is None
