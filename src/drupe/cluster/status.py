"""``ClusterStatus``: every node's conversation statuses, shared through Redis.

Contract (``docs/lifecycles/cluster.md``, "Cluster-wide status"):

* **Publish.** ``observe`` is the stream manager's status observer: synchronous, it never
  blocks the stream's producer. It queues the change on a bounded memory stream; one writer
  task writes the queue in pipelined batches. When the queue is full, changes are coalesced per
  conversation (the latest wins; never dropped) until the writer has caught up, and order per
  conversation is kept. A write is one Lua script: it applies ``status_record.supersedes``
  against the stored record, and when it accepts, stamps the next ``seq``, sets the field of
  the hash ``<prefix>:status`` and publishes the same JSON on ``<prefix>:status-events``, so
  the channel's order is the hash's order. A refused write returns the stored record, which
  this node then shows (it is newer than its own).
* **Bound.** Terminal records are indexed in the sorted set ``<prefix>:status-ended`` by update
  time; a write that takes it over ``max_terminal`` (default 10,000) deletes the oldest terminal
  records from the hash in the same script. A live record is never trimmed, so the hash holds
  at most ``max_terminal`` terminal records plus the cluster's live streams (and the live
  records of dead nodes until their takeover settles them).
* **Follow.** One pub/sub subscription per node. At start (and after a lost connection) it
  subscribes, waits for Redis's confirmation, then loads the hash: every change after the
  snapshot arrives on the channel, and the ``seq`` of each record skips what the snapshot
  already held, so there is no gap and no step back. Other nodes' records (and corrections of
  this node's refused writes) are passed to the observers (``add_observer``), which for the
  HTTP edge is its ``StatusBoard``. This node's own echoes are not passed on: its board already
  has them first hand. The view is bounded like the status book (``max_records``, live records
  kept).
* **Liveness.** Each node keeps a heartbeat key ``<prefix>:node:<node_id>`` with a TTL of the
  lease TTL, renewed every third of it, and its id in ``<prefix>:nodes`` (scored by the last
  beat; ids not seen for a day are pruned). ``dead_nodes()`` names the nodes, known there or
  named by a live record, whose heartbeat is gone; ``orphans()`` the live records they left.
  A dead node's live record stays as it is until a takeover settles it (``settle``): this
  module never invents a terminal.
* **Lifetime.** Built on a running node; ``async with ClusterStatus(node)`` beats once,
  subscribes and loads the snapshot before it returns; its tasks (writer, follower, heartbeat)
  belong to its own task group. Leaving drains the queue (shielded, at most ``drain_timeout``,
  default the lease TTL), then stops the tasks and removes the heartbeat: a node that leaves
  is not dead.
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Self

import anyio
import anyio.abc
from redis.exceptions import RedisError

from drupe.cluster.status_record import (
    ClusterRecord,
    decode_record,
    encode_unsequenced,
    supersedes,
)
from drupe.streaming.contracts import StatusObserver, StatusRecord
from drupe.streaming.status_book import DEFAULT_MAX_RECORDS, evict_unpinned

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from drupe.cluster.node import ClusterNode

__all__ = ["DEFAULT_MAX_TERMINAL", "ClusterStatus", "StatusKeys"]

log = logging.getLogger(__name__)

DEFAULT_MAX_TERMINAL: Final = 10_000
"""Terminal records the hash keeps (most recently updated first); live ones are never trimmed."""

DEFAULT_QUEUE: Final = 1_024
"""Status changes queued before they are coalesced per conversation."""

_BATCH: Final = 256
_MAX_BACKOFF: Final = 2.0
_NODE_HORIZON: Final = 86_400.0
"""Seconds a node id stays in ``<prefix>:nodes`` after its last beat."""

_PUT: Final = """
local function order(turn)
  if type(turn) ~= 'string' then return nil end
  local ms, n = string.match(turn, '^(%d+):(%d+)$')
  if ms == nil then return nil end
  return {tonumber(ms), tonumber(n)}
end
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if stored then
  local turn = cjson.decode(stored)['turnId']
  if turn ~= ARGV[3] then
    local before, after = order(turn), order(ARGV[3])
    if before and after and (after[1] < before[1] or
        (after[1] == before[1] and after[2] <= before[2])) then
      return {0, stored}
    end
  end
end
local seq = redis.call('INCR', KEYS[3])
local value = ARGV[2] .. ',"seq":' .. seq .. '}'
redis.call('HSET', KEYS[1], ARGV[1], value)
if ARGV[4] == '1' then
  redis.call('ZREM', KEYS[2], ARGV[1])
else
  redis.call('ZADD', KEYS[2], ARGV[5], ARGV[1])
  local excess = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[6])
  if excess > 0 then
    local old = redis.call('ZPOPMIN', KEYS[2], excess)
    for i = 1, #old, 2 do redis.call('HDEL', KEYS[1], old[i]) end
  end
end
redis.call('PUBLISH', ARGV[7], value)
return {1, value}
"""


@dataclass(frozen=True, slots=True)
class StatusKeys:
    """The Redis names cluster status uses under one prefix."""

    prefix: str

    @property
    def hash(self) -> str:
        return f"{self.prefix}:status"

    @property
    def ended(self) -> str:
        return f"{self.prefix}:status-ended"

    @property
    def seq(self) -> str:
        return f"{self.prefix}:status-seq"

    @property
    def channel(self) -> str:
        return f"{self.prefix}:status-events"

    @property
    def nodes(self) -> str:
        return f"{self.prefix}:nodes"

    def heartbeat(self, node_id: str) -> str:
        return f"{self.prefix}:node:{node_id}"


@dataclass(slots=True)
class _Entry:
    record: ClusterRecord
    local: bool  # reported by this node's manager (its board has it first hand)


_Change = tuple[str, StatusRecord, float]


class ClusterStatus:
    """This node's side of the cluster-wide status; see the module docstring."""

    def __init__(
        self,
        node: ClusterNode,
        *,
        max_records: int = DEFAULT_MAX_RECORDS,
        max_terminal: int = DEFAULT_MAX_TERMINAL,
        queue_size: int = DEFAULT_QUEUE,
        drain_timeout: float | None = None,
    ) -> None:
        if max_records < 1 or max_terminal < 1 or queue_size < 1:
            raise ValueError("max_records, max_terminal and queue_size must be >= 1")
        self.node_id = node.node_id
        self.keys = StatusKeys(node.prefix)
        self.ttl = node.settings.lease_ttl
        self.max_records = max_records
        self.max_terminal = max_terminal
        self.drain_timeout = self.ttl if drain_timeout is None else drain_timeout
        self._node = node
        self._put = node.redis.register_script(_PUT)
        self._view: OrderedDict[str, _Entry] = OrderedDict()
        self._observers: list[StatusObserver] = []
        self._send, self._receive = anyio.create_memory_object_stream[_Change](queue_size)
        self._overflow: dict[str, _Change] = {}
        self._drained = anyio.Event()
        self._closed = False
        self._queued = 0  # changes accepted by ``observe``
        self._settled = 0  # of those: written, refused or replaced by a later one
        self._progress = anyio.Event()
        self._tg: anyio.abc.TaskGroup | None = None
        self.written = 0
        self.refused = 0
        self.coalesced = 0

    # --- lifetime ----------------------------------------------------------------------------

    @property
    def _redis(self) -> Redis:
        return self._node.redis

    async def __aenter__(self) -> Self:
        await self._beat()
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            await self._tg.start(self._follow)
        except BaseException:
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
            raise
        self._tg.start_soon(self._write)
        self._tg.start_soon(self._heartbeat)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._tg is not None
        self._closed = True
        self._send.close()
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.drain_timeout):
            await self._drained.wait()
        if not self._drained.is_set():
            log.warning("cluster status: %d change(s) left unwritten", self.pending)
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(None, None, None)
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(self.drain_timeout):
                try:
                    async with self._redis.pipeline(transaction=True) as pipe:
                        pipe.delete(self.keys.heartbeat(self.node_id))
                        pipe.zrem(self.keys.nodes, self.node_id)
                        await pipe.execute()
                except (OSError, RedisError) as err:
                    log.warning("cluster status: could not remove the heartbeat: %s", err)
        return None

    # --- observing (sync) ------------------------------------------------------------------

    def observe(self, conversation_id: str, record: StatusRecord) -> None:
        """The manager's status observer: remember the change and queue it (never blocks)."""
        if self._closed:
            return
        now = time.time()
        previous = self._view.get(conversation_id)
        shared = ClusterRecord(
            conversation_id=conversation_id,
            status=record.status,
            turn_id=record.turn_id,
            node=self.node_id,
            at=now,
            last_completed_at=record.last_completed_at,
            seq=previous.record.seq if previous is not None else 0,
        )
        self._remember(conversation_id, shared, local=True)
        self._queued += 1
        self._queue((conversation_id, record, now))

    def settle(self, conversation_id: str, turn_id: str, status: str) -> None:
        """Write a terminal on behalf of a dead owner (its takeover), and show it here."""
        if status in ("pending", "streaming"):
            raise ValueError("a takeover settles a turn with a terminal status")
        record = StatusRecord(status=status, turn_id=turn_id)
        self.observe(conversation_id, record)
        self._notify(conversation_id, record)

    def _queue(self, change: _Change) -> None:
        conversation_id = change[0]
        if self._overflow:
            if conversation_id in self._overflow:
                self.coalesced += 1
                self._settled += 1
            self._overflow[conversation_id] = change
            return
        try:
            self._send.send_nowait(change)
        except anyio.WouldBlock:
            self._overflow[conversation_id] = change

    async def flush(self) -> None:
        """Wait until every change observed so far is in Redis (written, refused or replaced
        by a later change of its conversation)."""
        target = self._queued
        while self._settled < target and not self._drained.is_set():
            await self._progress.wait()

    @property
    def pending(self) -> int:
        """Changes queued or coalesced and not yet written."""
        return self._receive.statistics().current_buffer_used + len(self._overflow)

    # --- the shared view ---------------------------------------------------------------------

    def add_observer(self, observer: StatusObserver) -> Callable[[], None]:
        """Call ``observer(conversation_id, record)`` for every other node's change (and each
        correction of this node's); it is first given the view's records of other nodes.
        Returns the remover."""
        for conversation_id, entry in list(self._view.items()):
            if not entry.local:
                observer(conversation_id, _status_record(entry.record))
        self._observers.append(observer)
        return lambda: self._observers.remove(observer) if observer in self._observers else None

    def record(self, conversation_id: str) -> ClusterRecord | None:
        """The latest record this node knows for the conversation (any node's)."""
        entry = self._view.get(conversation_id)
        return None if entry is None else entry.record

    def records(self) -> dict[str, ClusterRecord]:
        """Every record in this node's view (bounded; live ones always kept)."""
        return {cid: entry.record for cid, entry in self._view.items()}

    def _remember(self, conversation_id: str, record: ClusterRecord, *, local: bool) -> None:
        self._view[conversation_id] = _Entry(record, local)
        self._view.move_to_end(conversation_id)
        if len(self._view) > self.max_records:
            evict_unpinned(self._view, self.max_records, lambda _, entry: entry.record.live)

    def _apply(
        self,
        conversation_id: str,
        record: ClusterRecord,
        *,
        forward: bool,
        correction: bool = False,
    ) -> None:
        """Merge a record read from Redis (snapshot, channel or a refused write's answer).

        A record no newer (by ``seq``) than the view's is skipped, except that a refused
        write's answer (``correction``) replaces this node's own unwritten record."""
        current = self._view.get(conversation_id)
        stale = current is not None and record.seq <= current.record.seq
        if stale and not (correction and current is not None and current.local):
            return
        if current is not None and not supersedes(current.record, record):
            return
        self._remember(conversation_id, record, local=False)
        if forward:
            self._notify(conversation_id, _status_record(record))

    def _notify(self, conversation_id: str, record: StatusRecord) -> None:
        for observer in list(self._observers):
            try:
                observer(conversation_id, record)
            except Exception:  # isolation boundary: status observers
                log.exception("cluster status observer raised")

    # --- liveness ----------------------------------------------------------------------------

    async def dead_nodes(self) -> set[str]:
        """Nodes known to the cluster (or named by a live record) whose heartbeat is gone."""
        members: Any = await self._redis.zrange(self.keys.nodes, 0, -1)
        candidates = {_text(member) for member in members or ()}
        candidates |= {entry.record.node for entry in self._view.values() if entry.record.live}
        candidates.discard(self.node_id)
        if not candidates:
            return set()
        ordered = sorted(candidates)
        async with self._redis.pipeline(transaction=False) as pipe:
            for node_id in ordered:
                pipe.exists(self.keys.heartbeat(node_id))
            alive = await pipe.execute()
        return {node_id for node_id, found in zip(ordered, alive, strict=True) if not found}

    async def orphans(self) -> dict[str, ClusterRecord]:
        """Live records whose node is dead: what a takeover has to settle."""
        dead = await self.dead_nodes()
        return {
            cid: entry.record
            for cid, entry in self._view.items()
            if entry.record.live and entry.record.node in dead
        }

    async def _beat(self) -> None:
        now = time.time()
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(
                self.keys.heartbeat(self.node_id),
                f"{now:.3f}",
                px=max(1, math.ceil(self.ttl * 1000)),
            )
            pipe.zadd(self.keys.nodes, {self.node_id: now})
            pipe.zremrangebyscore(self.keys.nodes, "-inf", now - _NODE_HORIZON)
            await pipe.execute()

    async def _heartbeat(self) -> None:
        while True:
            await anyio.sleep(self.ttl / 3)
            try:
                await self._beat()
            except (OSError, RedisError) as err:
                log.warning("cluster status: heartbeat failed: %s", err)

    # --- the writer --------------------------------------------------------------------------

    async def _write(self) -> None:
        try:
            closed = False
            while True:
                batch, closed = self._take(closed)
                if not batch:
                    if closed:
                        return
                    try:
                        batch = [await self._receive.receive()]
                    except anyio.EndOfStream:
                        closed = True
                        continue
                    more, closed = self._take(closed)
                    batch.extend(more)
                await self._write_batch(batch)
        finally:
            self._drained.set()
            self._progress.set()

    def _take(self, closed: bool) -> tuple[list[_Change], bool]:
        """What is queued now, in order: the stream's items, then the coalesced ones."""
        batch: list[_Change] = []
        while len(batch) < _BATCH:
            try:
                batch.append(self._receive.receive_nowait())
            except anyio.WouldBlock:
                break
            except anyio.EndOfStream:
                closed = True
                break
        else:
            return batch, closed
        if self._overflow:
            batch.extend(self._overflow.values())
            self._overflow = {}
        return batch, closed

    async def _write_batch(self, batch: list[_Change]) -> None:
        backoff = 0.05
        while True:
            try:
                async with self._redis.pipeline(transaction=False) as pipe:
                    for conversation_id, record, at in batch:
                        await self._put(
                            keys=[self.keys.hash, self.keys.ended, self.keys.seq],
                            args=self._args(conversation_id, record, at),
                            client=pipe,
                        )
                    results = await pipe.execute()
                break
            except (OSError, RedisError) as err:
                log.warning("cluster status write failed (%s); retrying in %.2f s", err, backoff)
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
        self._settled += len(batch)
        self._progress.set()
        self._progress = anyio.Event()
        for (conversation_id, _, _), (accepted, value) in zip(batch, results, strict=True):
            try:
                stored = decode_record(value)
            except ValueError:
                log.warning("cluster status: a malformed record for %s", conversation_id)
                continue
            if accepted:
                self.written += 1
                entry = self._view.get(conversation_id)
                if entry is not None and entry.record.seq < stored.seq:
                    entry.record = replace(entry.record, seq=stored.seq)
            else:
                self.refused += 1
                self._apply(conversation_id, stored, forward=True, correction=True)

    def _args(self, conversation_id: str, record: StatusRecord, at: float) -> list[Any]:
        shared = ClusterRecord(
            conversation_id=conversation_id,
            status=record.status,
            turn_id=record.turn_id,
            node=self.node_id,
            at=at,
            last_completed_at=record.last_completed_at,  # read now: stamped after the change
        )
        return [
            conversation_id,
            encode_unsequenced(shared),
            record.turn_id,
            "1" if shared.live else "0",
            at,
            self.max_terminal,
            self.keys.channel,
        ]

    # --- the follower ------------------------------------------------------------------------

    async def _follow(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        started = False
        backoff = 0.05
        while True:
            pubsub = self._redis.pubsub()
            try:
                await pubsub.subscribe(self.keys.channel)
                while True:  # the confirmation: from here on, every publish reaches us
                    message = await pubsub.get_message(timeout=None)
                    if message is not None and message["type"] == "subscribe":
                        break
                await self._load_snapshot(forward=started)
                if not started:
                    started = True
                    task_status.started()
                backoff = 0.05
                async for message in pubsub.listen():
                    if message["type"] == "message":
                        self._receive_message(message["data"])
            except (OSError, RedisError) as err:
                if not started:
                    raise
                log.warning("cluster status follow failed (%s); retrying in %.2f s", err, backoff)
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
            finally:
                with anyio.CancelScope(shield=True):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def _load_snapshot(self, *, forward: bool) -> None:
        raw: Any = await self._redis.hgetall(self.keys.hash)
        records: list[tuple[str, ClusterRecord]] = []
        for field, value in (raw or {}).items():
            try:
                records.append((_text(field), decode_record(value)))
            except ValueError:
                log.warning("cluster status: skipping a malformed record of %s", _text(field))
        for conversation_id, record in sorted(records, key=lambda item: item[1].seq):
            self._apply(conversation_id, record, forward=forward)

    def _receive_message(self, data: Any) -> None:
        try:
            record = decode_record(data)
        except ValueError:
            log.warning("cluster status: skipping a malformed event")
            return
        self._apply(record.conversation_id, record, forward=record.node != self.node_id)


def _status_record(record: ClusterRecord) -> StatusRecord:
    return StatusRecord(
        status=record.status, turn_id=record.turn_id, last_completed_at=record.last_completed_at
    )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
