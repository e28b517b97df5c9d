"""``coalesced_progress``: a tool's progress reports, at most one per interval, the latest kept.

A tool that learns of progress faster than a person can read it (a remote agent's streamed
text, one update per token) reports each snapshot to the ``update`` function this context
yields; the tool's ``ToolContext.progress`` then receives:

* the first snapshot at once, then at most one every ``interval`` seconds, always the latest
  (the ones in between are superseded, never reordered);
* a snapshot that arrived within an interval is delivered when the interval ends, even if
  nothing follows it (a trailing report: a quiet stretch never hides the last update);
* nothing after the block is left: a pending snapshot is dropped (the tool's final output
  replaces every snapshot anyway).

``interval`` 0 delivers every snapshot at once. An error raised in the block comes out bare
(not in an ``ExceptionGroup``); cancellation propagates.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio

__all__ = ["coalesced_progress"]

_NOTHING = object()


class _Coalescer:
    def __init__(self, report: Callable[[Any], None], interval: float) -> None:
        self._report = report
        self._interval = interval
        self._latest: Any = _NOTHING
        self._ready = anyio.Event()

    def update(self, snapshot: Any) -> None:
        if self._interval <= 0:
            self._report(snapshot)
            return
        self._latest = snapshot
        self._ready.set()

    async def run(self) -> None:
        while True:
            await self._ready.wait()
            self._ready = anyio.Event()
            snapshot, self._latest = self._latest, _NOTHING
            if snapshot is not _NOTHING:
                self._report(snapshot)
            await anyio.sleep(self._interval)


@asynccontextmanager
async def coalesced_progress(
    report: Callable[[Any], None], interval: float
) -> AsyncIterator[Callable[[Any], None]]:
    """Yield ``update(snapshot)``; ``report`` gets the coalesced snapshots (see the module)."""
    coalescer = _Coalescer(report, interval)
    try:
        async with anyio.create_task_group() as group:
            if interval > 0:
                group.start_soon(coalescer.run)
            try:
                yield coalescer.update
            finally:
                group.cancel_scope.cancel()
    except BaseExceptionGroup as grouped:
        if len(grouped.exceptions) != 1:
            raise
        raise grouped.exceptions[0] from None
