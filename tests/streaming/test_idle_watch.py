"""``IdleWatch``: one task stops every execution idle for longer than its bound.

The scans are driven with explicit times (``IdleWatch.scan(now)``), so no test waits for a
clock; the end-to-end idle pause through the manager is scenario 05 (``test_scenarios.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import anyio

from drupe.chunks.types import Chunk
from drupe.streaming.config import StreamConfig
from drupe.streaming.contracts import ExecutionSpec
from drupe.streaming.execution import new_execution
from drupe.streaming.idle_watch import IdleWatch
from drupe.streaming.live import Execution

CONFIG = StreamConfig(idle_timeout=10.0, approval_idle_timeout=100.0)


async def _never() -> AsyncIterator[Chunk]:
    if False:
        yield {}


def _execution(model_id: str = "m") -> Execution:
    return new_execution(ExecutionSpec(model_id=model_id, source=_never), CONFIG)


def _watch() -> tuple[IdleWatch, list[Callable[[], Coroutine[Any, Any, None]]]]:
    spawned: list[Callable[[], Coroutine[Any, Any, None]]] = []
    return IdleWatch(CONFIG, spawned.append), spawned


async def test_an_execution_without_chunks_for_the_bound_is_stopped_as_idle() -> None:
    watch, spawned = _watch()
    quiet, busy = _execution("quiet"), _execution("busy")
    start = anyio.current_time()
    watch.watch(quiet)
    watch.watch(busy)
    assert len(spawned) == 1, "one task for every execution"
    assert watch.scan(start + 5) == []
    busy.chunk_count += 1  # a chunk at ~5 s restarts its clock
    assert watch.scan(start + 5.5) == []
    assert watch.scan(start + 10.5) == [quiet]
    assert (quiet.status, quiet.abort_reason) == ("aborted", "idle-timeout")
    assert busy.status == "streaming"
    assert watch.scan(start + 15.4) == []
    assert watch.scan(start + 15.6) == [busy]
    assert len(watch) == 0


async def test_a_pending_approval_uses_the_approval_bound() -> None:
    watch, _ = _watch()
    waiting = _execution()
    waiting.pending_approvals.add("call-1")
    start = anyio.current_time()
    watch.watch(waiting)
    assert watch.scan(start + 50) == []
    assert waiting.status == "streaming"
    waiting.pending_approvals.clear()  # resolved, nothing streamed since: the plain bound
    assert watch.scan(start + 50.1) == [waiting]
    assert waiting.abort_reason == "idle-timeout"


async def test_an_ended_or_unwatched_execution_is_never_stopped() -> None:
    watch, _ = _watch()
    ended, gone = _execution("ended"), _execution("gone")
    start = anyio.current_time()
    watch.watch(ended)
    watch.watch(gone)
    ended.status = "done"
    watch.unwatch(gone)
    assert watch.scan(start + 1_000) == []
    assert (ended.status, gone.status) == ("done", "streaming")
    assert len(watch) == 0


def test_the_tick_is_an_eighth_of_the_smaller_bound_and_at_most_a_second() -> None:
    assert IdleWatch(StreamConfig(idle_timeout=0.08), lambda fn: None).tick == 0.01
    assert IdleWatch(CONFIG, lambda fn: None).tick == 1.0
