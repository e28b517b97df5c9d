"""``ManualClock`` (tasks): a ``drupe.tasks.clock.Clock`` that moves only when the test moves it.

``advance(seconds)`` / ``set(when)`` move the time and wake every sleeper whose deadline has
passed; ``wait_sleepers(n)`` returns once ``n`` tasks are asleep on the clock (so a test knows
the runner reached its sleep before it moves time). Nothing here sleeps on wall time.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import anyio

__all__ = ["ManualClock"]


class ManualClock:
    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("ManualClock needs a timezone-aware start")
        self._now = start
        self._sleepers: list[tuple[datetime, anyio.Event]] = []
        self._changed = anyio.Event()

    def now(self) -> datetime:
        return self._now

    @property
    def sleepers(self) -> list[datetime]:
        """The deadlines tasks are sleeping until."""
        return sorted(when for when, _ in self._sleepers)

    async def sleep_until(self, when: datetime) -> None:
        if when <= self._now:
            await anyio.lowlevel.checkpoint()
            return
        event = anyio.Event()
        item = (when, event)
        self._sleepers.append(item)
        self._notify()
        try:
            await event.wait()
        finally:
            self._sleepers.remove(item)
            self._notify()

    def set(self, when: datetime) -> None:
        if when < self._now:
            raise ValueError("a ManualClock never goes back")
        self._now = when
        for deadline, event in self._sleepers:
            if deadline <= when:
                event.set()

    def advance(self, seconds: float) -> None:
        self.set(self._now + timedelta(seconds=seconds))

    async def wait_sleepers(self, count: int = 1, *, until: datetime | None = None) -> None:
        """Return once ``count`` tasks sleep (with ``until``: one sleeps until exactly that)."""
        while len(self._sleepers) < count or (
            until is not None and all(when != until for when, _ in self._sleepers)
        ):
            changed = self._changed
            await changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()
