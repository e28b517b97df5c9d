"""``SseResponse``: a raw ASGI streaming response over a ``FrameBuffer``.

Each wake-up of the buffer is ONE ``http.response.body`` message (coalesced frames), never one
per event and never FastAPI's SSE class. The response watches ``receive`` for
``http.disconnect`` for its whole life (whatever the ASGI spec version), so a closed connection
is noticed at once even while nothing is being written; then ``on_close`` runs. An idle
connection gets an SSE comment (``PING_FRAME``) every ``ping_after`` seconds, from a timer
task of its own (a timeout per batch would cost a timer per write). ``on_close``
DETACHES the listener from its stream: closing a connection is never a stop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from drupe.chunks.sse import UI_MESSAGE_STREAM_HEADERS
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
        ping_after: float | None = 15.0,
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
        try:
            async with anyio.create_task_group() as tg:

                async def watch_disconnect() -> None:
                    while True:
                        message = await receive()
                        if message["type"] == "http.disconnect":
                            buffer.disconnected = True
                            tg.cancel_scope.cancel()
                            return

                async def ping() -> None:
                    # One timer per connection per interval, not one per batch.
                    assert self.ping_after is not None
                    seen = -1
                    while True:
                        await anyio.sleep(self.ping_after)
                        if buffer.writes == seen:
                            buffer.push(PING_FRAME)
                        seen = buffer.writes

                async def write() -> None:
                    # A task of its own: each wake-up resumes this short stack only, not the
                    # whole middleware chain the response was called through.
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
                            await send(
                                {"type": "http.response.body", "body": batch, "more_body": True}
                            )
                        await send({"type": "http.response.body", "body": b"", "more_body": False})
                    except OSError:
                        buffer.disconnected = True
                    tg.cancel_scope.cancel()

                tg.start_soon(watch_disconnect)
                if self.ping_after is not None:
                    tg.start_soon(ping)
                tg.start_soon(write)
        finally:
            buffer.disconnected = True
            try:
                self.on_close()
            except Exception:  # isolation boundary: detaching must never fail a response
                log.exception("closing an SSE response failed")
