"""``ClusterStatus``: every node's conversation statuses, shared through Redis.

Contract (``docs/lifecycles/cluster.md``, "Cluster-wide status"):

* **Publish.** ``observe`` is the stream manager's status observer: synchronous, it never
  blocks the stream's producer. It hands the change to the ``StatusWriter`` (``status_writer``:
  a bounded queue coalescing per conversation when full, one writer task, one Lua script per
  change that keeps the hash ``<prefix>:status``, its bound and the channel
  ``<prefix>:status-events`` in one order). A refused write (an older turn than the stored
  one) answers with the stored record, which this node then shows.
* **Follow.** One pub/sub subscription per node. At start (and after a lost connection) it
  subscribes, waits for Redis's confirmation, then loads the hash: every change after the
  snapshot arrives on the channel, and the ``seq`` of each record skips what the snapshot
  already held, so there is no gap and no step back. Other nodes' records (and corrections of
  this node's refused writes) are passed to the observers (``add_observer``), which for the
  HTTP edge is its ``StatusBoard``. This node's own echoes are not passed on: its board already
  has them first hand. The view is bounded like the status book (``max_records``, live records
  kept). When it subscribes again to a Redis that restarted (a new run id: its counter and hash
  may have lost records), the view's seqs start again from 0 and the node writes its own
  records again.
* **Liveness.** Each node keeps a heartbeat key ``<prefix>:node:<node_id>`` with a TTL of the
  lease TTL, renewed every third of it, and its id in ``<prefix>:nodes`` (``heartbeat``'s
  ``NodeHeartbeat``, run in this task group). ``dead_nodes()`` names the nodes, known there or
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
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.abc
from redis.exceptions import RedisError

from drupe.cluster.heartbeat import NodeHeartbeat
from drupe.cluster.redis_restarts import server_id
from drupe.cluster.status_record import ClusterRecord, decode_record, supersedes
from drupe.cluster.status_writer import (
    DEFAULT_MAX_TERMINAL,
    DEFAULT_QUEUE,
    StatusKeys,
    StatusWriter,
)
from drupe.lifetimes import TaskOwner
from drupe.streaming.contracts import StatusObserver, StatusRecord
from drupe.streaming.status_book import DEFAULT_MAX_RECORDS, evict_unpinned

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from drupe.cluster.node import ClusterNode

__all__ = ["DEFAULT_MAX_TERMINAL", "ClusterStatus", "StatusKeys"]

log = logging.getLogger(__name__)

_MAX_BACKOFF: Final = 2.0


@dataclass(slots=True)
class _Entry:
    record: ClusterRecord
    local: bool  # reported by this node's manager (its board has it first hand)


class ClusterStatus(TaskOwner):
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
        if max_records < 1:
            raise ValueError("max_records must be >= 1")
        self.node_id = node.node_id
        self.keys = StatusKeys(node.prefix)
        self.ttl = node.settings.lease_ttl
        self.max_records = max_records
        self.drain_timeout = self.ttl if drain_timeout is None else drain_timeout
        self.after_timeout = self.drain_timeout  # leaving the heartbeat on exit
        self._node = node
        self.heartbeat = NodeHeartbeat(
            node.redis, prefix=node.prefix, node_id=node.node_id, ttl=self.ttl
        )
        self.writer = StatusWriter(
            node.redis,
            self.keys,
            node.node_id,
            on_result=self._written,
            max_terminal=max_terminal,
            queue_size=queue_size,
        )
        self._view: OrderedDict[str, _Entry] = OrderedDict()
        self._observers: list[StatusObserver] = []
        self._closed = False
        self._server: str | None = None
        """The Redis run id the follower last subscribed to (``_redis_restarted``)."""

    # --- lifetime ----------------------------------------------------------------------------

    @property
    def _redis(self) -> Redis:
        return self._node.redis

    async def _start_tasks(self, group: anyio.abc.TaskGroup) -> None:
        await self.heartbeat.beat()
        await group.start(self._follow)
        group.start_soon(self.writer.run)
        group.start_soon(self.heartbeat.run)

    async def _before_cancel(self) -> None:
        self._closed = True
        self.writer.close()
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.drain_timeout):
            await self.writer.drained.wait()
        if not self.writer.drained.is_set():
            log.warning("cluster status: %d change(s) left unwritten", self.writer.pending)

    async def _after_tasks(self) -> None:
        try:
            await self.heartbeat.leave()
        except (OSError, RedisError) as err:
            log.warning("cluster status: could not remove the heartbeat: %s", err)

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
        self.writer.put(conversation_id, record, now)

    def settle(self, conversation_id: str, turn_id: str, status: str) -> None:
        """Write a terminal on behalf of a dead owner (its takeover), and show it here."""
        if status in ("pending", "streaming"):
            raise ValueError("a takeover settles a turn with a terminal status")
        record = StatusRecord(status=status, turn_id=turn_id)
        self.observe(conversation_id, record)
        self._notify(conversation_id, record)

    async def flush(self) -> None:
        """Wait until every change observed so far is in Redis (``StatusWriter.flush``)."""
        await self.writer.flush()

    def _written(self, conversation_id: str, seq: int, refused_by: ClusterRecord | None) -> None:
        """The writer's outcome: note the seq, or show the newer record that won."""
        if refused_by is not None:
            self._apply(conversation_id, refused_by, forward=True, correction=True)
            return
        entry = self._view.get(conversation_id)
        if entry is not None and entry.record.seq < seq:
            entry.record = replace(entry.record, seq=seq)

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
        echo = record.node == self.node_id and not correction
        if current is not None and current.local and echo:  # this node's own write: note seq
            current.record = replace(current.record, seq=record.seq)
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
        candidates = await self.heartbeat.known()
        candidates |= {entry.record.node for entry in self._view.values() if entry.record.live}
        return await self.heartbeat.dead(candidates)

    async def orphans(self) -> dict[str, ClusterRecord]:
        """Live records whose node is dead: what a takeover has to settle."""
        dead = await self.dead_nodes()
        return {
            cid: entry.record
            for cid, entry in self._view.items()
            if entry.record.live and entry.record.node in dead
        }

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
                server = await server_id(self._redis)
                if server is not None:
                    if self._server is not None and server != self._server:
                        self._redis_restarted()
                    self._server = server
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
                    await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]

    def _redis_restarted(self) -> None:
        """Redis restarted (a new run id), without its data or from an older snapshot: its
        ``seq`` counter started again lower than the records this node knows, which would then
        skip every new one, and its hash lost records. So the view's seqs start again too, and
        this node writes its own records again (the latest it knows first hand)."""
        log.warning("cluster status: Redis restarted; writing this node's records again")
        for conversation_id, entry in self._view.items():
            entry.record = replace(entry.record, seq=0)
            if entry.local:  # as it was, with the time of its change
                self.writer.put(conversation_id, _status_record(entry.record), entry.record.at)

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
