"""``NodeReader``: one blocking ``XREAD`` loop per node, fanned out to the node's subscribers.

Contract (``docs/lifecycles/cluster.md``; the design rule of ``deps-lab.md`` §6):

* A node reads every chunk log it watches with ONE loop on ONE dedicated connection: one
  ``XREAD BLOCK`` over all watched keys at once, however many local subscribers each key has.
  ``xread_calls`` counts the reads, so a test can check that N subscribers cost one reader.
* ``watch(key, after, deliver)`` returns once the watcher has been given every entry after
  ``after`` that exists (its replay, read with ``XRANGE``); from then on the loop delivers the
  new entries. Each watcher gets each entry once, in order, with no gap: it is registered before
  its replay is read, entries the loop reads meanwhile are buffered, and every delivery is
  filtered by the watcher's own cursor.
* ``deliver`` is called synchronously from the loop; it must not block (a subscriber queues the
  entry and returns). A ``deliver`` that raises is dropped from the key; the others go on.
* A new key wakes the blocked read at once (``CLIENT UNBLOCK`` of the reader's connection), so a
  watcher never waits for the block timeout.
* Reads are batched in time: after a read that returned entries, the loop waits a window
  before the next one, so the entries of every live stream written in that window come back in
  ONE ``XREAD``. The loop reads at most 1/window times a second however many streams are live
  and however fast they write; an entry waits at most the window longer than it would have
  (one arriving while the loop is blocked is delivered at once). The window grows with the
  keys the loop reads (``read_window``): 10 ms with one key, 25 ms (the stated bound on the
  latency it adds) from ``WINDOW_FULL_AT`` (64) keys on, because every ``XREAD`` names every
  key and its cursor: at scale the reads' own bytes, not the entries, are most of what Redis
  receives (bench/README.md, "Issue 24 §4"). ``NodeReader(window=...)`` fixes it instead.
* Entries are decoded by the log (``RedisChunkLog.decode``: its cached numbers of the key's
  execution and part ids, read once per key, and again on an unknown number).
* The loop is a task of the reader's own task group (``async with NodeReader(...)``). Connection
  errors are retried with a capped backoff; cursors are kept, so nothing is skipped; the log's
  cached numbers are dropped (Redis may have lost data).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.abc
from redis.exceptions import RedisError

from drupe.cluster.chunk_log import RedisChunkLog
from drupe.cluster.log_encoding import LogEntry
from drupe.lifetimes import TaskOwner

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["READ_WINDOW", "NodeReader", "cursor_key", "read_window"]

log = logging.getLogger(__name__)

_BLOCK_MS: Final = 5_000
_READ_COUNT: Final = 1_000
_MAX_BACKOFF: Final = 2.0
READ_WINDOW_MIN: Final = 0.010
READ_WINDOW: Final = 0.025
"""Seconds between two reads that found entries, at most: the most an entry's delivery is
delayed (the window with ``WINDOW_FULL_AT`` keys or more)."""
WINDOW_FULL_AT: Final = 64


def read_window(keys: int) -> float:
    """The wait after a read that found entries, with ``keys`` keys read: from
    ``READ_WINDOW_MIN`` (one key) up to ``READ_WINDOW`` (``WINDOW_FULL_AT`` keys or more)."""
    share = min(1.0, max(0, keys - 1) / (WINDOW_FULL_AT - 1))
    return READ_WINDOW_MIN + (READ_WINDOW - READ_WINDOW_MIN) * share


def cursor_key(cursor: str) -> tuple[int, int]:
    """A stream id as a sortable pair (``"0"`` is the start)."""
    ms, _, seq = cursor.partition("-")
    return int(ms), int(seq or 0)


@dataclass(eq=False, slots=True)
class _Watcher:
    deliver: Callable[[LogEntry], None]
    cursor: tuple[int, int]
    buffer: list[LogEntry] | None = field(default_factory=list)  # None once caught up

    def offer(self, entry: LogEntry) -> None:
        if self.buffer is not None:
            self.buffer.append(entry)
            return
        position = cursor_key(entry.cursor)
        if position > self.cursor:
            self.cursor = position
            self.deliver(entry)


class NodeReader(TaskOwner):
    """One ``XREAD`` loop for this node. ``reader`` must be a dedicated single connection."""

    def __init__(
        self,
        redis: Redis,
        reader: Redis,
        log_: RedisChunkLog,
        *,
        window: float | None = None,
    ) -> None:
        self._redis = redis
        self.window = window
        self._reader = reader
        self._log = log_
        self._watchers: dict[str, list[_Watcher]] = {}
        self._positions: dict[str, str] = {}
        self._changed = anyio.Event()
        self._client_id: int | None = None
        self._blocked = False
        self.xread_calls = 0

    async def _start_tasks(self, group: anyio.abc.TaskGroup) -> None:
        self._client_id = int(await self._reader.client_id())
        group.start_soon(self._run)

    @property
    def blocked(self) -> bool:
        """Whether the loop is waiting in ``XREAD BLOCK`` now."""
        return self._blocked

    @property
    def keys(self) -> list[str]:
        """The keys the loop reads now."""
        return list(self._watchers)

    async def watch(
        self, key: str, after: str, deliver: Callable[[LogEntry], None]
    ) -> Callable[[], None]:
        """Replay ``key`` after ``after`` to ``deliver``, then follow it; returns ``unwatch``."""
        watcher = _Watcher(deliver, cursor_key(after))
        fresh = key not in self._watchers
        self._watchers.setdefault(key, []).append(watcher)
        if fresh:
            self._positions[key] = after if after not in ("0", "") else "0-0"
            await self._wake()
        try:
            replay = await self._log.read(key, after)
        except BaseException:
            self._remove(key, watcher)
            raise
        buffered, watcher.buffer = watcher.buffer or [], None
        for entry in (*replay, *buffered):
            watcher.offer(entry)

        def unwatch() -> None:
            self._remove(key, watcher)

        return unwatch

    def _remove(self, key: str, watcher: _Watcher) -> None:
        watchers = self._watchers.get(key)
        if watchers is None or watcher not in watchers:
            return
        watchers.remove(watcher)
        if not watchers:
            del self._watchers[key]
            self._positions.pop(key, None)

    async def _wake(self) -> None:
        self._changed.set()
        if self._blocked and self._client_id is not None:
            await self._redis.client_unblock(self._client_id)

    async def _run(self) -> None:
        backoff = 0.05
        while True:
            if not self._positions:
                self._changed = anyio.Event()
                await self._changed.wait()
                continue
            streams: dict[Any, Any] = dict(self._positions)
            self._blocked = True
            try:
                self.xread_calls += 1
                result: Any = await self._reader.xread(streams, count=_READ_COUNT, block=_BLOCK_MS)
            except (OSError, RedisError) as err:
                log.warning("chunk log read failed (%s); retrying in %.2f s", err, backoff)
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
                self._log.forget()  # Redis may have lost data: read the execution numbers again
                with contextlib.suppress(OSError, RedisError):
                    # A reconnected connection has a new id (for CLIENT UNBLOCK).
                    self._client_id = int(await self._reader.client_id())
                continue
            finally:
                self._blocked = False
            backoff = 0.05
            await self._deliver(result)
            window = read_window(len(streams)) if self.window is None else self.window
            if result and window > 0:
                await anyio.sleep(window)  # let the live streams' next entries gather

    async def _deliver(self, result: Any) -> None:
        for raw_key, rows in result or ():
            key = raw_key.decode() if isinstance(raw_key, bytes) else str(raw_key)
            try:
                entries = await self._log.decode(key, rows)
            except (OSError, RedisError) as err:  # reading the execution numbers failed
                log.warning("chunk log decode failed (%s); reading again", err)
                break  # positions unchanged: the next XREAD reads these entries again
            for entry in entries:
                if key in self._positions:
                    self._positions[key] = entry.cursor
                for watcher in list(self._watchers.get(key, ())):
                    try:
                        watcher.offer(entry)
                    except Exception:  # isolation boundary: one subscriber's delivery
                        log.exception("a chunk log watcher raised; it is dropped")
                        self._remove(key, watcher)
