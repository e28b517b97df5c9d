"""``SseResponse``: a raw ASGI streaming response over a ``FrameBuffer``.

Each wake-up of the buffer is ONE ``http.response.body`` message (coalesced frames), never one
per event and never FastAPI's SSE class. The response watches ``receive`` for
``http.disconnect`` for its whole life (whatever the ASGI spec version), so a closed connection
is noticed at once even while nothing is being written; then ``on_close`` runs. An idle
connection gets an SSE comment (``PING_FRAME``) after ``ping_after`` seconds without a write:
timed by the app's ``PingTicker`` (one task for every connection, started by the app's
lifespan) when the app runs one with that interval, else by a timeout on the watch itself (a
timeout per batch would cost a timer per write). A response costs ONE task besides the
request's own: the writer. ``on_close`` DETACHES the listener from its stream: closing a
connection is never a stop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from drupe.chunks.sse import UI_MESSAGE_STREAM_HEADERS
from drupe.gateway.ping_ticker import PING_INTERVAL, ticker_of
from drupe.streaming.listeners.sse import PING_FRAME, FrameBuffer

__all__ = ["SseResponse"]

log = logging.getLogger(__name__)


class SseResponse(Response):
    """Stream a ``FrameBuffer`` as ``text/event-stream``; detach via ``on_close`` when done."""

    def __init__(
        self,
        buffer: FrameBuffer,
        *,
        on_close: Callable[[], None],
        headers: Mapping[str, str] | None = None,
        ping_after: float | None = PING_INTERVAL,
        ui_message_stream: bool = True,
    ) -> None:
        self.buffer = buffer
        self.on_close = on_close
        self.ping_after = ping_after
        self.status_code = 200
        self.background = None
        base = dict(UI_MESSAGE_STREAM_HEADERS)
        if not ui_message_stream:
            del base["x-vercel-ai-ui-message-stream"]
        self.init_headers({**base, **(headers or {})})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        buffer = self.buffer
        ticker = ticker_of(scope) if self.ping_after is not None else None
        if ticker is not None and ticker.interval != self.ping_after:
            ticker = None
        try:
            if ticker is not None:
                ticker.add(buffer)
            async with anyio.create_task_group() as tg:
                # ONE task besides the request's own (issue 11 §2: a task costs ~3 KiB at
                # 10,000 connections): the writer runs in a task of its own, so each wake-up
                # resumes its short stack only, not the whole middleware chain the response was
                # called through; this task watches for the disconnect and times the pings.
                tg.start_soon(self._write, send, tg.cancel_scope)
                await self._watch(receive, None if ticker is not None else self.ping_after)
                tg.cancel_scope.cancel()
        finally:
            if ticker is not None:
                ticker.discard(buffer)
            buffer.disconnected = True
            try:
                self.on_close()
            except Exception:  # isolation boundary: detaching must never fail a response
                log.exception("closing an SSE response failed")

    async def _watch(self, receive: Receive, ping_after: float | None) -> None:
        """Return once the client is gone; with ``ping_after``, queue a ping after each idle
        interval (without it, nothing is timed here)."""
        buffer = self.buffer
        seen = -1
        while True:
            if ping_after is None:
                message = await receive()
            else:
                # One timer per connection per interval, not one per batch.
                with anyio.move_on_after(ping_after) as waited:
                    message = await receive()
                if waited.cancelled_caught:
                    if buffer.writes == seen:
                        buffer.push(PING_FRAME)
                    seen = buffer.writes
                    continue
            if message["type"] == "http.disconnect":
                buffer.disconnected = True
                return

    async def _write(self, send: Send, scope: anyio.CancelScope) -> None:
        buffer = self.buffer
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": self.status_code,
                    "headers": self.raw_headers,
                }
            )
            next_batch = buffer.next_batch
            while (batch := await next_batch()) is not None:
                await send({"type": "http.response.body", "body": batch, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            buffer.disconnected = True
        scope.cancel()
