"""The clock the task runner sleeps on: ``SystemClock`` in production, injectable in tests.

``now()`` is timezone-aware UTC wall time; ``sleep_until(when)`` returns at or after ``when``
(it may return early only by being cancelled). Tests use ``drupe.testing.task_clock.ManualClock``,
which moves only when the test advances it, so no test waits on wall time.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

import anyio

__all__ = ["Clock", "SystemClock"]

_MAX_NAP_S = 300.0
"""A long sleep is cut in naps, so a wall-clock jump (suspend, NTP) is noticed within 5 min."""


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...

    async def sleep_until(self, when: datetime) -> None:
        """Return at (or soon after) ``when``."""
        ...


class SystemClock:
    """Wall time."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, when: datetime) -> None:
        while True:
            left = (when - self.now()).total_seconds()
            if left <= 0:
                return
            await anyio.sleep(min(left, _MAX_NAP_S))
