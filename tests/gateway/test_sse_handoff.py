"""``DrupeApp``: an ``SseResponse`` streams after the request's own stack has unwound (the
middleware, routing and FastAPI frames are not kept per live connection), while everything
before the response (guards, dependencies, error mapping) runs as in FastAPI.

The ASGI server side is played by the test (``_Peer``); the app, its middleware and the
response are the real ones.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from fastapi import Depends
from starlette.types import ASGIApp, Receive, Scope, Send

from drupe.api.app_factory import DrupeApp
from drupe.http.errors import install_error_handlers
from drupe.http.guards import OriginCheck
from drupe.http.sse_response import HANDOFF_KEY, SseResponse
from drupe.streaming.listeners.sse import FrameBuffer
from tests.gateway.test_sse_response import _Peer


class _Route:
    """What the test route saw and did."""

    def __init__(self) -> None:
        self.buffer = FrameBuffer()
        self.closed: list[bool] = []
        self.events: list[str] = []


class _RaiseAfter:
    """A middleware that fails once the inner app has returned."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)
        if scope["path"] == "/api/fail-after":
            raise RuntimeError("after the response")


def _app(route: _Route) -> DrupeApp:
    app = DrupeApp()
    install_error_handlers(app)

    async def dependency() -> AsyncIterator[None]:
        route.events.append("dependency entered")
        yield
        route.events.append("dependency exited")

    @app.get("/api/stream")
    @app.get("/api/fail-after")
    async def stream(_: None = Depends(dependency)) -> SseResponse:
        route.events.append("endpoint")
        return SseResponse(route.buffer, on_close=lambda: route.closed.append(True))

    app.add_middleware(_RaiseAfter)
    app.add_middleware(OriginCheck, allowed=())
    return app


def _scope(path: str, headers: list[tuple[bytes, bytes]] | None = None) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"drupe.test"), *(headers or [])],
        "server": ("drupe.test", 80),
        "client": ("127.0.0.1", 1),
    }


async def test_the_response_streams_after_the_requests_stack_unwound() -> None:
    route = _Route()
    peer = _Peer()
    scope = _scope("/api/stream")
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_app(route), scope, peer.receive, peer.send)
            route.buffer.push(b"data: 1\n\n")
            await peer.body_seen.wait()
            # Streaming: the endpoint's dependency has been torn down already, and the
            # request's spent FastAPI exit stacks are no longer held by the scope.
            assert route.events == ["dependency entered", "endpoint", "dependency exited"]
            assert not [key for key in scope if key.startswith("fastapi_")]
            assert HANDOFF_KEY not in scope
            assert route.closed == []
            route.buffer.push(b"data: 2\n\n")
            route.buffer.close()
    assert peer.sent[0]["type"] == "http.response.start"
    assert b"".join(peer.bodies()) == b"data: 1\n\ndata: 2\n\n"
    assert peer.sent[-1]["more_body"] is False
    assert route.closed == [True]


async def test_a_disconnect_while_streaming_closes_the_response_once() -> None:
    route = _Route()
    peer = _Peer()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_app(route), _scope("/api/stream"), peer.receive, peer.send)
            route.buffer.push(b"data: 1\n\n")
            await peer.body_seen.wait()
            peer.gone.set()
    assert route.closed == [True]
    assert route.buffer.disconnected


async def test_the_guards_still_answer_before_any_route() -> None:
    route = _Route()
    peer = _Peer()
    scope = _scope("/api/stream", [(b"origin", b"https://evil.example")])
    with anyio.fail_after(5):
        await _app(route)(scope, peer.receive, peer.send)
    assert peer.sent[0]["status"] == 403
    assert route.events == [] and route.closed == []


async def test_a_request_that_fails_after_handing_off_closes_the_response() -> None:
    route = _Route()
    peer = _Peer()
    with anyio.fail_after(5), pytest.raises(RuntimeError, match="after the response"):
        await _app(route)(_scope("/api/fail-after"), peer.receive, peer.send)
    assert route.closed == [True], "the listener is detached: nothing streams it any more"
    assert route.buffer.disconnected
    # The response never started, so the app's last-resort handler answered, as before.
    assert peer.sent[0]["status"] == 500
    assert peer.bodies() == [b'{"detail":"internal server error"}']
