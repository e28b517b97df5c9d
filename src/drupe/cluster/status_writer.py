"""``StatusWriter``: a node's status changes into Redis, without ever blocking the producer.

Contract (``docs/lifecycles/cluster.md``, "Cluster-wide status"):

* ``put`` is synchronous and never blocks: it queues the change on a bounded memory stream
  (``queue_size``). When the stream is full, changes are coalesced per conversation (the latest
  wins; nothing is dropped) until the writer has taken the queue, and until then every change
  goes there, so each conversation's changes keep their order. Memory is bounded by the queue
  plus one change per conversation.
* ``run`` (a task of the owner's task group) writes what is queued in pipelined batches of one
  Lua script per change. The script applies ``status_record.supersedes`` against the stored
  record; when it accepts, it stamps the next ``seq`` (one counter per cluster), sets the field
  of the hash ``<prefix>:status``, keeps the terminal index ``<prefix>:status-ended`` and
  publishes the same JSON on ``<prefix>:status-events``, all atomically, so the channel's order
  is the hash's order. ``on_result(conversation_id, seq, refused_by)`` is told each outcome:
  the accepted write's ``seq``, or the newer stored record that refused it.
* **Bound.** A terminal record is indexed by its update time, a live one is not; a write that
  takes the index over ``max_terminal`` deletes the oldest terminal records from the hash in
  the same script. So the hash holds at most ``max_terminal`` terminal records plus the live
  ones (the cluster's live streams, and dead nodes' until their takeover settles them).
* A failed write is retried with a capped backoff, the batch kept. ``close`` ends the queue:
  ``run`` writes what is left, then returns (``drained``); ``flush`` waits until everything put
  so far is settled (written, refused, or replaced by a later change of its conversation).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import anyio
from redis.exceptions import RedisError

from drupe.cluster.heartbeat import heartbeat_key, nodes_key
from drupe.cluster.status_record import LIVE_STATUSES, ClusterRecord, decode_record
from drupe.streaming.contracts import StatusRecord

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["DEFAULT_MAX_TERMINAL", "DEFAULT_QUEUE", "StatusKeys", "StatusWriter"]

log = logging.getLogger(__name__)

DEFAULT_MAX_TERMINAL: Final = 10_000
"""Terminal records the hash keeps (most recently updated first); live ones are never trimmed."""

DEFAULT_QUEUE: Final = 1_024
"""Status changes queued before they are coalesced per conversation."""

_BATCH: Final = 256
_MAX_BACKOFF: Final = 2.0

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
local completed = ARGV[9]
if completed == '' then completed = 'null' end
local value = '{"conversationId":' .. cjson.encode(ARGV[1]) .. ',"status":' ..
  cjson.encode(ARGV[2]) .. ',"turnId":' .. cjson.encode(ARGV[3]) .. ',"node":' ..
  cjson.encode(ARGV[8]) .. ',"lastCompletedAt":' .. completed .. ',"at":' .. ARGV[5] ..
  ',"seq":' .. seq .. '}'
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
return {1, seq}
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
        return nodes_key(self.prefix)

    def heartbeat(self, node_id: str) -> str:
        return heartbeat_key(self.prefix, node_id)


_Change = tuple[str, StatusRecord, float]
ResultHandler = Callable[[str, int, ClusterRecord | None], None]
"""``(conversation_id, seq, refused_by)``: the write's ``seq``, or the stored record (and its
``seq``) that refused it."""


class StatusWriter:
    """One node's queue of status changes and its writer; see the module docstring."""

    def __init__(
        self,
        redis: Redis,
        keys: StatusKeys,
        node_id: str,
        *,
        on_result: ResultHandler,
        max_terminal: int = DEFAULT_MAX_TERMINAL,
        queue_size: int = DEFAULT_QUEUE,
    ) -> None:
        if max_terminal < 1 or queue_size < 1:
            raise ValueError("max_terminal and queue_size must be >= 1")
        self._redis = redis
        self.keys = keys
        self.node_id = node_id
        self.max_terminal = max_terminal
        self._on_result = on_result
        self._put = redis.register_script(_PUT)
        self._send, self._receive = anyio.create_memory_object_stream[_Change](queue_size)
        self._overflow: dict[str, _Change] = {}
        self.drained = anyio.Event()
        self._closed = False
        self._queued = 0  # changes accepted by ``put``
        self._settled = 0  # of those: written, refused or replaced by a later one
        self._progress = anyio.Event()
        self.written = 0
        self.refused = 0
        self.coalesced = 0

    def put(self, conversation_id: str, record: StatusRecord, at: float) -> None:
        """Queue one change (never blocks; ignored once closed)."""
        if self._closed:
            return
        self._queued += 1
        change = (conversation_id, record, at)
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

    def close(self) -> None:
        """No more changes: ``run`` writes what is queued and returns."""
        self._closed = True
        self._send.close()

    @property
    def pending(self) -> int:
        """Changes queued or coalesced and not yet taken by the writer."""
        return self._receive.statistics().current_buffer_used + len(self._overflow)

    async def flush(self) -> None:
        """Wait until every change put so far is settled (or the writer has stopped)."""
        target = self._queued
        while self._settled < target and not self.drained.is_set():
            await self._progress.wait()

    async def run(self) -> None:
        """Write the queue until it is closed and empty."""
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
                await self._write(batch)
        finally:
            self.drained.set()
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

    async def _write(self, batch: list[_Change]) -> None:
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
        for (conversation_id, _, _), (accepted, answer) in zip(batch, results, strict=True):
            if accepted:
                self.written += 1
                self._on_result(conversation_id, int(answer), None)
                continue
            self.refused += 1
            try:
                stored = decode_record(answer)
            except ValueError:
                log.warning("cluster status: a malformed record for %s", conversation_id)
                continue
            self._on_result(conversation_id, stored.seq, stored)

    def _args(self, conversation_id: str, record: StatusRecord, at: float) -> list[Any]:
        """The script's arguments: the record's fields, each once (the script writes the
        record's JSON, ``status_record.decode_record``'s form, from them)."""
        completed = record.last_completed_at  # read now: stamped after the change
        return [
            conversation_id,
            record.status,
            record.turn_id,
            "1" if record.status in LIVE_STATUSES else "0",
            _number(at),
            self.max_terminal,
            self.keys.channel,
            self.node_id,
            "" if completed is None else _number(completed),
        ]


def _number(value: float) -> str:
    """A JSON number (the script writes it into the record as it is)."""
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"not a finite number: {value!r}")
    return repr(number)
