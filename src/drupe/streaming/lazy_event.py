"""``LazyEvent``: an ``anyio.Event`` made only when somebody waits.

Every live stream and execution carries a few "it happened" flags (settled, evicted, terminal
idle) that are usually never awaited; an ``anyio.Event`` costs about 0.9 KiB each, which matters
at 10,000 live streams. Same contract as ``anyio.Event``: ``set`` is idempotent and wakes every
waiter; ``wait`` returns at once when already set.
"""

from __future__ import annotations

import anyio

__all__ = ["LazyEvent"]


class LazyEvent:
    __slots__ = ("_event", "_is_set")

    def __init__(self) -> None:
        self._is_set = False
        self._event: anyio.Event | None = None

    def set(self) -> None:
        self._is_set = True
        if self._event is not None:
            self._event.set()

    def is_set(self) -> bool:
        return self._is_set

    async def wait(self) -> None:
        if self._is_set:
            await anyio.lowlevel.checkpoint()
            return
        if self._event is None:
            self._event = anyio.Event()
        await self._event.wait()
