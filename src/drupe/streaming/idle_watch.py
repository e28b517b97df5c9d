"""``IdleWatch``: the idle watchdog of every streaming execution, as ONE task.

Contract: an execution that publishes no chunk for ``idle_timeout`` seconds (for
``approval_idle_timeout`` while one of its tool approvals is pending) is stopped with the
reason ``idle-timeout`` (``Execution.request_abort``; the loop then ends ``paused``). The
bound is kept within one tick: an execution is stopped between ``limit`` and
``limit + 2 * tick`` seconds after its last chunk, ``tick`` being an eighth of the smaller
bound (at most one second).

How: the watch never reads a clock per chunk and arms no timer per execution. One task wakes
every tick and compares each execution's ``chunk_count`` with the count it saw at the previous
tick; an unchanged count since ``limit`` seconds is idle. The task runs in the manager's task
group while at least one execution is watched, and ends when none is (issue 11 §2: a timer
handle per execution and a clock read plus a deadline check per chunk, at 10,000 live streams).

Must never: await while scanning (the scan is one synchronous pass), or outlive its last
execution.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import anyio

from drupe.streaming.config import StreamConfig
from drupe.streaming.live import Execution

__all__ = ["IdleWatch"]

_MAX_TICK = 1.0


class IdleWatch:
    """Stops executions that stayed idle too long; one task for all of them."""

    def __init__(
        self,
        config: StreamConfig,
        spawn: Callable[[Callable[[], Coroutine[Any, Any, None]]], None],
    ) -> None:
        self.idle = config.idle_timeout
        self.approval_idle = config.approval_idle_timeout
        self.tick = min(_MAX_TICK, min(self.idle, self.approval_idle) / 8)
        self._spawn = spawn
        self._seen: dict[Execution, tuple[int, float]] = {}
        """Per execution: the chunk count at the last change seen, and when it was seen."""
        self._running = False

    def __len__(self) -> int:
        return len(self._seen)

    def watch(self, execution: Execution) -> None:
        """Start the idle clock of ``execution`` now (its loop is about to read the source)."""
        self._seen[execution] = (execution.chunk_count, anyio.current_time())
        if not self._running:
            self._running = True
            self._spawn(self._run)

    def unwatch(self, execution: Execution) -> None:
        self._seen.pop(execution, None)

    def scan(self, now: float) -> list[Execution]:
        """One pass at time ``now``: stop the idle executions; returns them."""
        stopped = []
        seen = self._seen
        for execution, (count, since) in list(seen.items()):
            if execution.status != "streaming":  # its loop ended (its terminal work may run)
                del seen[execution]
                continue
            if execution.chunk_count != count:
                seen[execution] = (execution.chunk_count, now)
                continue
            limit = self.approval_idle if execution.pending_approvals else self.idle
            if now - since >= limit:
                del seen[execution]
                execution.request_abort("idle-timeout")
                stopped.append(execution)
        return stopped

    async def _run(self) -> None:
        try:
            while self._seen:
                await anyio.sleep(self.tick)
                self.scan(anyio.current_time())
        finally:
            self._running = False
