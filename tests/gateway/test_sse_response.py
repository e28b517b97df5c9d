"""``SseResponse`` at the ASGI level: coalesced writes, pings on an idle connection, and the
disconnect noticed while nothing is written (then ``on_close`` detaches, once).

The ASGI server side (``receive`` / ``send``) is played by the test; the response, its
``FrameBuffer`` and its watch/writer tasks are the real ones.
"""

from __future__ import annotations

from typing import Any

import anyio

from drupe.http.sse_response import SseResponse
from drupe.streaming.listeners.sse import PING_FRAME, FrameBuffer

SCOPE: dict[str, Any] = {"type": "http", "method": "GET", "path": "/x", "headers": []}


class _Peer:
    """The server side of one connection: ``receive`` blocks until ``hang_up``."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.gone = anyio.Event()
        self.body_seen = anyio.Event()
        self.requested = False

    async def receive(self) -> dict[str, Any]:
        if not self.requested:
            self.requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        if message["type"] == "http.response.body":
            self.body_seen.set()

    def bodies(self) -> list[bytes]:
        return [m["body"] for m in self.sent if m["type"] == "http.response.body"]


async def test_the_queued_frames_go_out_as_one_write_and_the_response_ends_on_close() -> None:
    buffer = FrameBuffer()
    closed: list[bool] = []
    peer = _Peer()
    buffer.push(b"data: 1\n\n")
    buffer.push(b"data: 2\n\n")
    buffer.close()
    response = SseResponse(buffer, on_close=lambda: closed.append(True))
    with anyio.fail_after(5):
        await response(SCOPE, peer.receive, peer.send)
    assert peer.sent[0]["type"] == "http.response.start"
    assert peer.sent[0]["status"] == 200
    assert peer.bodies() == [b"data: 1\n\ndata: 2\n\n", b""]
    assert peer.sent[-1]["more_body"] is False
    assert closed == [True]
    assert not buffer.alive()


async def test_an_idle_connection_gets_pings_and_a_disconnect_is_noticed_while_idle() -> None:
    buffer = FrameBuffer()
    closed: list[bool] = []
    peer = _Peer()
    response = SseResponse(buffer, on_close=lambda: closed.append(True), ping_after=0.01)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(response, SCOPE, peer.receive, peer.send)
            await peer.body_seen.wait()  # nothing was queued: the first body is a ping
            assert closed == []
            peer.gone.set()
    assert peer.bodies()[0] == PING_FRAME
    assert set(peer.bodies()) == {PING_FRAME}, "only pings, and no end of the response"
    assert closed == [True]
    assert buffer.disconnected
    assert not buffer.alive()


async def test_without_pings_the_disconnect_still_ends_the_response() -> None:
    buffer = FrameBuffer()
    closed: list[bool] = []
    peer = _Peer()
    response = SseResponse(buffer, on_close=lambda: closed.append(True), ping_after=None)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(response, SCOPE, peer.receive, peer.send)
            buffer.push(b"data: 1\n\n")
            await peer.body_seen.wait()
            peer.gone.set()
    assert peer.bodies() == [b"data: 1\n\n"]
    assert closed == [True]
    assert buffer.disconnected
