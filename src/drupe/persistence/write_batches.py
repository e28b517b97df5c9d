"""``WriteBatches``: concurrent writes of one kind committed together, one transaction a batch.

Under load the cost of a small write on SQLite is not its SQL but its turns through the event
loop (connection checkout, each statement, the commit: each a hop to the driver's thread) while
it holds the one write lock; a hundred admissions at once wait for a hundred such transactions
in a row. ``WriteBatches.run(item)`` queues ``item`` and waits for the batch that writes it:

* the first caller while no batch is being written writes its item alone, at once (no timer:
  an idle server adds no latency);
* callers that arrive while a batch is being written queue; the next caller to get the turn
  writes every queued item in ONE call of ``batch`` (one transaction);
* ``batch`` must write all its items or raise and write nothing; then each item of that batch
  is written on its own with ``single`` (same results and errors as without batching);
* every caller returns only once its item is committed (or raises its own error), so the
  durability of each write is that of the single write it replaces.

A caller cancelled while writing a batch rolls it back; the other items of that batch go back to
the queue and are written by their own callers' turn. A caller cancelled while waiting for its
turn takes its item out of the queue (nothing of it is written), unless another caller's batch
has already taken it (then it is written, as a single write cancelled after its commit began).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import anyio

__all__ = ["WriteBatches"]

T = TypeVar("T")
R = TypeVar("R")


@dataclass(eq=False)
class _Entry(Generic[T]):
    item: T
    done: bool = False
    error: BaseException | None = None
    result: Any = None


class WriteBatches(Generic[T, R]):
    """Coalesce concurrent writes of ``T`` items; ``batch`` writes many (and returns each
    item's result, in order), ``single`` one."""

    def __init__(
        self,
        single: Callable[[T], Awaitable[R]],
        batch: Callable[[Sequence[T]], Awaitable[Sequence[R]]],
    ) -> None:
        self._single = single
        self._batch = batch
        self._queue: list[_Entry[T]] = []
        self._turn = anyio.Lock()
        self.batches = 0
        """Batches of two or more items written in one transaction (for tests and benches)."""

    async def run(self, item: T) -> R:
        """Write ``item`` (alone or with others queued at the same time); its result, or raise
        its error."""
        entry = _Entry(item)
        self._queue.append(entry)
        try:
            await self._turn.acquire()
        except BaseException:
            if entry in self._queue:  # cancelled while waiting: its item is not written
                self._queue.remove(entry)
            raise
        try:
            if not entry.done:
                taken, self._queue = self._queue, []
                try:
                    await self._write(taken)
                finally:
                    unwritten = [e for e in taken if not e.done]
                    self._queue[:0] = [e for e in unwritten if e is not entry]
        finally:
            self._turn.release()
        if entry.error is not None:
            raise entry.error
        result: R = entry.result
        return result

    async def _write(self, entries: list[_Entry[T]]) -> None:
        if len(entries) > 1:
            try:
                results = await self._batch([e.item for e in entries])
            except Exception:  # each item is then written alone: its own error
                pass
            else:
                self.batches += 1
                for e, result in zip(entries, results, strict=True):
                    e.result, e.done = result, True
                return
        for e in entries:
            try:
                e.result = await self._single(e.item)
            except Exception as err:  # the item's own caller raises it
                e.error = err
            e.done = True
