"""``SseResponse``: a raw ASGI streaming response over a ``FrameBuffer``.

Each wake-up of the buffer is ONE ``http.response.body`` message (coalesced frames), never one
per event and never FastAPI's SSE class. The response watches ``receive`` for
``http.disconnect`` for its whole life (whatever the ASGI spec version), so a closed connection
is noticed at once even while nothing is being written; then ``on_close`` runs. An idle
connection gets an SSE comment (``PING_FRAME``) after ``ping_after`` seconds without a write:
timed by the app's ``PingTicker`` (one task for every connection, started by the app's
lifespan) when the app runs one with that interval, else by a timeout on the writer's wait. A
response costs NO task besides the request's own, and no task group: the request's task writes
the batches, and the pending ``receive()`` is stepped from its future's callbacks
(``ReceiveWatch``); a disconnect marks the buffer and wakes the writer, which returns (a
``send`` blocked on a paused transport is released by the server when the connection drops,
as uvicorn does). ``on_close`` DETACHES the listener from its stream: closing a
connection is never a stop. Under ``DrupeApp`` the response streams after the request's stack
has unwound (``HANDOFF_KEY``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Final

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from drupe.chunks.sse import UI_MESSAGE_STREAM_HEADERS
from drupe.http.ping_ticker import PING_INTERVAL, PingTicker, ticker_of
from drupe.http.receive_watch import ReceiveWatch
from drupe.streaming.listeners.sse import FrameBuffer

__all__ = ["HANDOFF_KEY", "SseHandoff", "SseResponse"]

log = logging.getLogger(__name__)

HANDOFF_KEY: Final = "drupe.sse_handoff"
"""The scope key of an empty list that the app's outermost layer (``DrupeApp``) offers per
HTTP request. An ``SseResponse`` called with it puts ``(itself, ticker, receive, send)`` there
and returns at once; the outermost layer then streams it (``stream``) once the request's stack
has returned, or ``abandon``s it if that stack raised. Every check, dependency and error mapping
of the request runs as before; only the streaming no longer keeps the middleware, routing and
FastAPI frames (three ``AsyncExitStack``s among them) alive for the life of the connection
(issue 11 §2). Without the key (a bare ASGI caller) the response streams in its own call."""

SseHandoff = tuple["SseResponse", PingTicker | None, Receive, Send]


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
        ticker = ticker_of(scope) if self.ping_after is not None else None
        if ticker is not None and ticker.interval != self.ping_after:
            ticker = None
        slot = scope.get(HANDOFF_KEY)
        if type(slot) is list and not slot:
            # The app's outermost layer streams this response once the request's own stack
            # (middleware, routing, FastAPI's exit stacks) has unwound: see ``HANDOFF_KEY``.
            slot.append((self, ticker, receive, send))
            return
        await self.stream(ticker, receive, send)

    def abandon(self) -> None:
        """The response will never stream (its request failed after handing it off): close."""
        self.buffer.disconnected = True
        try:
            self.on_close()
        except Exception:  # isolation boundary: detaching must never fail a response
            log.exception("closing an SSE response failed")

    async def stream(self, ticker: PingTicker | None, receive: Receive, send: Send) -> None:
        """Write the response until the buffer ends or the client leaves; then ``on_close``."""
        buffer = self.buffer
        # No task besides the request's own (issue 24 §2): the pending ``receive()`` is driven
        # by its future's callbacks (``ReceiveWatch``), and this task writes the batches.
        watch = ReceiveWatch(receive, self._received)
        try:
            if ticker is not None:
                ticker.add(buffer)
            watch.start()
            await self._write(send, None if ticker is not None else self.ping_after)
        finally:
            watch.close()
            if ticker is not None:
                ticker.discard(buffer)
            self.abandon()

    def _received(self, message: Message | None) -> bool:
        """A message ``receive()`` returned (None: it failed); False ends the watch."""
        if message is not None and message["type"] != "http.disconnect":
            return True
        self.buffer.disconnect()
        return False

    async def _write(self, send: Send, ping_after: float | None) -> None:
        """Send the head, then each batch, then the end; return early once the client is gone.
        With ``ping_after`` (no ticker), an idle wait that long sends a ping."""
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
            while (batch := await next_batch(ping_after=ping_after)) is not None:
                await send({"type": "http.response.body", "body": batch, "more_body": True})
            if not buffer.disconnected:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            buffer.disconnected = True
