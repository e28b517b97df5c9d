"""``ManualClock``: a ``Clock`` (``drupe.channels.outbox``) a test drives.

``now()`` is virtual seconds; ``sleep(d)`` waits until the test has ``advance``d the clock
past ``now + d``. ``sleepers`` counts the tasks waiting, so a test can wait (without sleeping)
until a timer is armed before moving time: ``await clock.wait_for_sleepers(1)``.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

__all__ = ["ManualClock"]


class ManualClock:
    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._changed = anyio.Event()
        self.sleepers = 0

    def now(self) -> float:
        return self._now

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def sleep(self, seconds: float) -> None:
        until = self._now + seconds
        self.sleepers += 1
        self._notify()
        try:
            while self._now < until:
                await self._changed.wait()
        finally:
            self.sleepers -= 1
            self._notify()

    def advance(self, seconds: float) -> None:
        self._now += seconds
        self._notify()

    async def wait_for_sleepers(self, count: int = 1, within: float = 10.0) -> None:
        await self.wait_until(lambda: self.sleepers >= count, within)

    async def wait_until(self, predicate: Callable[[], bool], within: float = 10.0) -> None:
        """Wait until ``predicate()`` holds, re-checked whenever a sleep starts or ends."""
        with anyio.fail_after(within):
            while not predicate():
                await self._changed.wait()
