"""``PingTicker``: the keep-alive pings of every SSE response of an app, as ONE task.

Contract: a ``FrameBuffer`` registered with ``add`` that got no write (``FrameBuffer.writes``
unchanged) between two ticks gets ``PING_FRAME`` pushed at the second one; ticks come every
``interval`` seconds. So an idle connection gets a ping between ``interval`` and ``2 *
interval`` seconds after its last write, as with a timeout per connection (``SseResponse``'s
fallback, which re-arms a ``move_on_after(interval)`` on each watch). ``discard`` forgets a
buffer (idempotent).

Ownership: the app's lifespan enters ``async with PingTicker(...)``, whose task group owns the
ticking task for the app's whole life; the responses find the ticker on ``app.state.ping_ticker``
(``ticker_of``). Without it (an app whose lifespan did not run, a bare ASGI test),
``SseResponse`` times its own pings.

Why (issue 11 §2): a timeout per connection costs a cancel scope and a timer handle per live
SSE connection (~1.2 KiB at 10,000 connections) and a timer re-armed every interval; the
ticker costs one dict entry per connection and one pass per interval.

Must never: await while scanning (one synchronous pass), or push into a closed buffer (``push``
ignores it).
"""

from __future__ import annotations

from typing import Any, Final

import anyio
import anyio.abc

from drupe.lifetimes import TaskOwner
from drupe.streaming.listeners.sse import PING_FRAME, FrameBuffer

__all__ = ["PING_INTERVAL", "PingTicker", "ticker_of"]

PING_INTERVAL: Final = 15.0
"""Seconds of silence after which an SSE connection gets a ping (the default)."""


class PingTicker(TaskOwner):
    """Pings every registered idle ``FrameBuffer``; one task for all of them."""

    def __init__(self, interval: float = PING_INTERVAL) -> None:
        self.interval = interval
        self._seen: dict[FrameBuffer, int] = {}
        """Per buffer: its ``writes`` at the previous tick (or when it was added)."""

    def __len__(self) -> int:
        return len(self._seen)

    def add(self, buffer: FrameBuffer) -> None:
        self._seen[buffer] = buffer.writes

    def discard(self, buffer: FrameBuffer) -> None:
        self._seen.pop(buffer, None)

    def tick(self) -> int:
        """One pass: ping each buffer that wrote nothing since the last pass; returns how many."""
        pinged = 0
        seen = self._seen
        for buffer, writes in seen.items():
            if buffer.writes == writes:
                buffer.push(PING_FRAME)
                pinged += 1
            seen[buffer] = buffer.writes  # a value update: the dict's size does not change
        return pinged

    async def _run(self) -> None:
        while True:
            await anyio.sleep(self.interval)
            self.tick()

    async def _start_tasks(self, group: anyio.abc.TaskGroup) -> None:
        group.start_soon(self._run)

    async def _after_tasks(self) -> None:
        self._seen.clear()


def ticker_of(scope: Any) -> PingTicker | None:
    """The running ``PingTicker`` of the ASGI ``scope``'s app, if its lifespan started one."""
    app = scope.get("app")
    state = getattr(app, "state", None)
    ticker = getattr(state, "ping_ticker", None)
    return ticker if isinstance(ticker, PingTicker) else None
