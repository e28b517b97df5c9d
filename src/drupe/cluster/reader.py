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
  keys the node follows (``read_window``): 10 ms with one key, 25 ms (the stated bound on the
  latency it adds) from ``WINDOW_FULL_AT`` (64) keys on (bench/README.md, "Issue 24 §4").
  ``NodeReader(window=...)`` fixes it instead.
* A turn whose writer feeds (its announcement named its feed, ``FEED_NAMED``: every node of
  this version; or set ``FEED_MARK``: an earlier version's, fed to one of ``FEED_SHARDS``
  feeds) is followed through its feed, not its log (``RedisChunkLog.fed``): every write to a
  log also appends, in the same Redis function call, an item (the log key, the entry id, the
  payload) to the feed of its writer (one per node process), so the loop's ``XREAD`` names one
  feed per writer whose turns the node follows, however many turns, instead of every turn's
  log (at scale, the reads' own bytes were most of what Redis received). The watchers see the
  same entries with the same cursors (the log's entry ids). The feed's position is taken (its
  newest id) before a watcher's replay is read, so an entry is either in the replay or read
  from the feed after it. A turn without a mark (a turn list; a writer of an earlier version
  that did not feed) is read directly, as before.
* A feed keeps ``FEED_KEEP_MS`` (8 s) of entries. A feed the loop has not read to its end for
  half of that (a Redis outage, a stalled process) is caught up from its turns' logs
  (``XRANGE`` after each turn's oldest watcher cursor), and every ``reconcile_every`` seconds
  the loop compares each fed turn's newest log entry with its watchers' cursors and catches up
  a turn that stayed behind across two checks (a write that did not feed: a node of an earlier
  version taking a turn over). ``caught_up`` counts the entries delivered that way.
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
from drupe.cluster.log_encoding import LogEntry, as_text, feed_items
from drupe.cluster.log_functions import FEED_KEEP_MS
from drupe.lifetimes import TaskOwner

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["READ_WINDOW", "NodeReader", "cursor_key", "read_window"]

log = logging.getLogger(__name__)

_BLOCK_MS: Final = 2_000
"""Milliseconds an idle ``XREAD`` blocks: under half a feed's keep, so an idle feed is read to
its end well before it could be trimmed past the loop."""
_READ_COUNT: Final = 1_000
_MAX_BACKOFF: Final = 2.0
READ_WINDOW_MIN: Final = 0.010
READ_WINDOW: Final = 0.025
"""Seconds between two reads that found entries, at most: the most an entry's delivery is
delayed (the window with ``WINDOW_FULL_AT`` keys or more)."""
WINDOW_FULL_AT: Final = 64
RECONCILE_EVERY: Final = 5.0
"""Seconds between two comparisons of the fed turns' logs with their watchers' cursors."""
_FEED_STALE: Final = FEED_KEEP_MS / 2000
"""Seconds without reading a feed to its end after which its turns are caught up from logs."""


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
        reconcile_every: float = RECONCILE_EVERY,
    ) -> None:
        self._redis = redis
        self.window = window
        self.reconcile_every = reconcile_every
        self._reader = reader
        self._log = log_
        self._watchers: dict[str, list[_Watcher]] = {}
        self._positions: dict[str, str] = {}
        """What the loop's ``XREAD`` reads: keys read directly, and feeds."""
        self._fed: dict[str, str] = {}
        """Log key -> its feed, for the keys followed through a feed."""
        self._fed_keys: dict[str, set[str]] = {}
        self._starting: dict[str, anyio.Event] = {}
        self._deciding: dict[str, anyio.Event] = {}
        self._read_to_end: dict[str, float] = {}
        self._behind: dict[str, str] = {}
        self._changed = anyio.Event()
        self._client_id: int | None = None
        self._blocked = False
        self.xread_calls = 0
        self.caught_up = 0

    async def _start_tasks(self, group: anyio.abc.TaskGroup) -> None:
        self._client_id = int(await self._reader.client_id())
        group.start_soon(self._run)
        group.start_soon(self._reconcile)

    @property
    def blocked(self) -> bool:
        """Whether the loop is waiting in ``XREAD BLOCK`` now."""
        return self._blocked

    @property
    def keys(self) -> list[str]:
        """The keys the node follows now (read directly or through a feed)."""
        return list(self._watchers)

    @property
    def read_keys(self) -> list[str]:
        """What the loop's ``XREAD`` names now: keys read directly, and feeds."""
        return list(self._positions)

    async def watch(
        self, key: str, after: str, deliver: Callable[[LogEntry], None]
    ) -> Callable[[], None]:
        """Replay ``key`` after ``after`` to ``deliver``, then follow it; returns ``unwatch``."""
        watcher = _Watcher(deliver, cursor_key(after))
        self._watchers.setdefault(key, []).append(watcher)
        try:
            await self._follow(key, after)
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

    async def _follow(self, key: str, after: str) -> None:
        """Make the loop read ``key``'s new entries from now on, directly or through its feed;
        returns once it does (so a replay read after it misses nothing)."""
        while key not in self._fed and key not in self._positions:
            deciding = self._deciding.get(key)
            if deciding is not None:  # another watcher of the key asks Redis: wait for it
                await deciding.wait()
                continue
            deciding = self._deciding[key] = anyio.Event()
            try:
                feed = await self._log.fed(key) if ":log:" in key else None
                if feed is not None:
                    self._fed[key] = feed
                    self._fed_keys.setdefault(feed, set()).add(key)
                else:
                    self._positions[key] = after if after not in ("0", "") else "0-0"
                    await self._wake()
            finally:
                del self._deciding[key]
                deciding.set()
        feed_ = self._fed.get(key)
        if feed_ is not None:
            await self._start_feed(feed_)

    async def _start_feed(self, feed: str) -> None:
        """Have the loop read ``feed`` from its newest entry on (once per feed)."""
        while feed not in self._positions and feed in self._fed_keys:
            starting = self._starting.get(feed)
            if starting is not None:
                await starting.wait()
                continue
            starting = self._starting[feed] = anyio.Event()
            try:
                rows: Any = await self._redis.xrevrange(feed, "+", "-", count=1)
                if feed in self._fed_keys:
                    self._positions[feed] = as_text(rows[0][0]) if rows else "0-0"
                    self._read_to_end[feed] = anyio.current_time()
                    await self._wake()
            finally:
                del self._starting[feed]
                starting.set()

    def _remove(self, key: str, watcher: _Watcher) -> None:
        watchers = self._watchers.get(key)
        if watchers is None or watcher not in watchers:
            return
        watchers.remove(watcher)
        if watchers:
            return
        del self._watchers[key]
        self._behind.pop(key, None)
        feed = self._fed.pop(key, None)
        if feed is None:
            self._positions.pop(key, None)
            return
        keys = self._fed_keys.get(feed)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._fed_keys[feed]
                self._positions.pop(feed, None)
                self._read_to_end.pop(feed, None)

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
            await self._deliver(result, streams)
            window = read_window(len(self._watchers)) if self.window is None else self.window
            if result and window > 0:
                await anyio.sleep(window)  # let the live streams' next entries gather

    async def _deliver(self, result: Any, streams: dict[str, str]) -> None:
        rows_of: dict[str, Any] = {}
        for raw_key, rows in result or ():
            rows_of[raw_key.decode() if isinstance(raw_key, bytes) else str(raw_key)] = rows
        now = anyio.current_time()
        feeds = [k for k in streams if self._log.is_feed(k)]
        for feed in feeds:
            rows = rows_of.pop(feed, ())
            if feed not in self._fed_keys:
                continue  # no longer followed (its turns were unwatched during the read)
            if len(rows) < _READ_COUNT:  # read to its end
                if now - self._read_to_end.get(feed, now) > _FEED_STALE:
                    # Entries may have been trimmed from the feed meanwhile: the logs have them.
                    await self._catch_up(list(self._fed_keys.get(feed, ())))
                self._read_to_end[feed] = now
            await self._deliver_feed(feed, rows)
        for key, rows in rows_of.items():
            entries = await self._decoded(key, rows)
            if entries is None:
                break  # positions unchanged: the next XREAD reads these entries again
            for entry in entries:
                if key in self._positions:
                    self._positions[key] = entry.cursor
                self._offer(key, entry)

    async def _deliver_feed(self, feed: str, rows: Any) -> None:
        for entry_id, fields in rows:
            by_key: dict[str, list[tuple[str, dict[bytes, bytes]]]] = {}
            try:
                items = feed_items(fields.get(b"f", b"") if fields else b"")
            except ValueError as err:
                log.warning("feed %s entry %s is malformed (%s); skipped", feed, entry_id, err)
                items = []
            for key, cursor, payload in items:
                if self._fed.get(key) == feed:
                    by_key.setdefault(key, []).append((cursor, {b"p": payload}))
            for key, entry_rows in by_key.items():
                entries = await self._decoded(key, entry_rows)
                if entries is None:
                    return  # position unchanged: the next XREAD reads this entry again
                for entry in entries:
                    self._offer(key, entry)
            if feed in self._positions:
                self._positions[feed] = as_text(entry_id)

    async def _decoded(self, key: str, rows: Any) -> list[LogEntry] | None:
        """``rows`` of ``key`` decoded, or None when reading the execution numbers failed."""
        try:
            return await self._log.decode(key, rows)
        except (OSError, RedisError) as err:
            log.warning("chunk log decode failed (%s); reading again", err)
            return None

    def _offer(self, key: str, entry: LogEntry) -> None:
        for watcher in list(self._watchers.get(key, ())):
            try:
                watcher.offer(entry)
            except Exception:  # isolation boundary: one subscriber's delivery
                log.exception("a chunk log watcher raised; it is dropped")
                self._remove(key, watcher)

    async def _catch_up(self, keys: list[str]) -> None:
        """Deliver what ``keys``' logs hold past their watchers (each watcher filters by its
        own cursor, so nothing is delivered twice)."""
        for key in keys:
            cursors = [w.cursor for w in self._watchers.get(key, ()) if w.buffer is None]
            if not cursors:
                continue
            oldest = min(cursors)
            try:
                entries = await self._log.read(key, f"{oldest[0]}-{oldest[1]}")
            except (OSError, RedisError) as err:
                log.warning("chunk log catch-up of %s failed (%s)", key, err)
                continue
            for entry in entries:
                if any(cursor_key(entry.cursor) > w.cursor for w in self._watchers.get(key, ())):
                    self.caught_up += 1
                self._offer(key, entry)

    async def _reconcile(self) -> None:
        """Every ``reconcile_every`` seconds: catch up a fed turn whose log stayed ahead of its
        watchers across two checks (a write that did not feed)."""
        while True:
            await anyio.sleep(self.reconcile_every)
            keys = list(self._fed)
            if not keys:
                continue
            try:
                async with self._redis.pipeline(transaction=False) as pipe:
                    for key in keys:
                        pipe.xrevrange(key, "+", "-", count=1)
                    tails: list[Any] = await pipe.execute()
            except (OSError, RedisError) as err:
                log.warning("chunk log reconcile failed (%s)", err)
                continue
            late: list[str] = []
            for key, rows in zip(keys, tails, strict=True):
                cursors = [w.cursor for w in self._watchers.get(key, ()) if w.buffer is None]
                newest = as_text(rows[0][0]) if rows else None
                if newest is None or not cursors or cursor_key(newest) <= min(cursors):
                    self._behind.pop(key, None)
                    continue
                before = self._behind.get(key)
                if before is not None and cursor_key(before) > min(cursors):
                    late.append(key)  # what the log held at the last check is still not here
                self._behind[key] = newest
            if late:
                await self._catch_up(late)
