"""``LogWriter``: the owner's side of the chunk log — every stream's chunks, coalesced, in Redis.

Contract (``docs/lifecycles/cluster.md``, "The chunk log"):

* ``listener(conversation_id)`` is a stream-listener factory for the stream manager: every
  stream the node starts gets one ``LogListener``. Its ``on_chunk`` never blocks: it hands the
  event to the writer, which coalesces text deltas per execution (``Coalescer``, at most
  ``window`` seconds) and writes the batches in order with ONE writer task per node.
* Before a turn's first entry, the writer announces the turn: an entry ``{e: turn, n: node}`` in
  the conversation's turn list ``<prefix>:turns:<conversation>`` (a capped Redis Stream
  followers of "the next turn" watch), the field ``<conversation>`` of the hash
  ``<prefix>:live`` (the takeover sweep's list of live turns), and the field ``FEED_NAMED`` of
  the turn's hash, whose value is this writer's feed (every write of this version feeds the
  writer's own feed, ``RedisChunkLog.feed``, one feed entry per call: readers follow the turn
  through it; the writer gives it its TTL again every ``FEED_TTL / 3`` seconds while it
  writes). ``announce(conversation, turn)``, called when a turn is admitted, queues that
  announcement at once and waits until it is written, so every node finds the turn live from
  the moment its submit is acknowledged. A conversation's field leaves ``live`` when
  a terminal says the conversation is done. Each execution's row (its ``anchor_message_id``) is
  recorded in ``<log key>:anchors`` when it first speaks, so a takeover can rebuild that row from
  the log (the same hash holds the log's numbers of execution and part ids, ``#<n>`` fields, which
  ``RedisChunkLog`` writes; it gets the log's TTL at each terminal).
* An execution's terminal (``on_done``/``on_paused``/``on_error``, cleanup phase: after the row
  was written) flushes what is held, then writes the terminal entry and waits until it is in
  Redis (bounded by ``terminal_timeout``).
* Every write is fenced with the node's lease on the conversation (``fence_of``): once the
  lease is lost the writes are refused by Redis itself, and that turn's pending batches are
  dropped (``fenced_out`` counts them). A lease that merely vanished (Redis restarted without
  its data, and no node took it since) is re-taken (``recover``) and the write retried.
* A Redis error drops nothing silently: the batch is retried with a capped backoff while the
  turn is live; ``write_errors`` counts the failures.
* Redis lost its data: the writer keeps each live turn's entries in the log (``track``, until
  the turn ends), and when a write finds the turn gone (``DataLost``: nothing was written) it
  restores the turn first (announcement, anchors, then ``RedisChunkLog.restore``), then writes
  what found the loss; ``restores`` counts them. The turn's lease comes first: taken again
  when it vanished, and a turn whose lease another node holds is fenced out, not announced
  again (``_hold_lease``). A turn that writes nothing would not find the
  loss, and a log an older snapshot left short is found by no write: so every
  ``probe_interval`` (1 s) the writer asks Redis its run id, and after a restart checks every
  live turn (``RedisChunkLog.incomplete``: its announcement, its log's length) and restores
  those Redis lost.
* Batches go out together: the batches queued when the writer gets to them, one per turn (up
  to ``MANY_BATCHES`` turns, each with its own fence), are ONE ``RedisChunkLog.append_many``
  call, one round trip. A turn's next batch goes in the next call, so a fast turn's readers get
  its first batch while the next is written. Each turn's entries keep their order (a write
  that fails is retried before any later one of its turn); ``batch_calls`` counts the calls.
"""

from __future__ import annotations

import hashlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.abc
import orjson
from redis.exceptions import NoScriptError, RedisError

from drupe.cluster.chunk_log import (
    FEED_NAMED,
    FEED_TTL,
    Append,
    DataLost,
    FencedOut,
    RedisChunkLog,
    anchors_key,
)
from drupe.cluster.coalesce import DEFAULT_WINDOW, Coalescer
from drupe.cluster.lease import Fence
from drupe.cluster.log_encoding import as_text
from drupe.cluster.redis_restarts import server_id
from drupe.lifetimes import TaskOwner
from drupe.streaming.listeners.base import (
    BaseListener,
    StreamEvent,
    TerminalPhase,
    TerminalResult,
)

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = [
    "MANY_BATCHES",
    "LogListener",
    "LogWriter",
    "anchors_key",
    "hdel_if_turn",
    "live_key",
    "turns_key",
]

log = logging.getLogger(__name__)

_TURNS_MAXLEN: Final = 64
_ANCHORS_TTL: Final = 24 * 3600
"""Seconds a turn's execution -> row map lives (a day: past any live turn and its log)."""
_MAX_BACKOFF: Final = 1.0
MANY_BATCHES: Final = 256
"""Batches written in one call at most."""


def turns_key(prefix: str, conversation_id: str) -> str:
    """The conversation's turn list (one entry per started turn)."""
    return f"{prefix}:turns:{conversation_id}"


def live_key(prefix: str) -> str:
    """The hash of live turns: conversation -> ``{"node", "turn", "key"}``."""
    return f"{prefix}:live"


@dataclass(slots=True)
class _Op:
    """One write, in order: an announcement, a batch or a terminal."""

    conversation_id: str
    key: str
    kind: str  # "announce" | "anchor" | "batch" | "end" | "restore" | "check"
    execution_id: str = ""
    chunks: list[Any] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    result: TerminalResult | None = None
    written: anyio.Event | None = None
    turn_id: str = ""
    anchor: str = ""


class LogWriter(TaskOwner):
    """One writer task per node; see the module docstring."""

    def __init__(
        self,
        redis: Redis,
        chunk_log: RedisChunkLog,
        *,
        node_id: str,
        fence_of: Callable[[str], Fence | None],
        lease_key: Callable[[str], str],
        recover: Callable[[str], Awaitable[Fence | None]] | None = None,
        window: float = DEFAULT_WINDOW,
        terminal_timeout: float = 5.0,
        probe_interval: float = 1.0,
    ) -> None:
        self._redis = redis
        self._log = chunk_log
        self.prefix = chunk_log.prefix
        self.node_id = node_id
        self._fence_of = fence_of
        self._lease_key = lease_key
        self._recover = recover
        self.window = window
        self.terminal_timeout = terminal_timeout
        self.probe_interval = probe_interval
        self._server: str | None = None
        """The run id of the Redis server last seen (``_watch_server``)."""
        self._check_due = False
        """Redis restarted and its live turns were not all checked yet."""
        self._feed_kept_until = 0.0
        self._coalescers: dict[tuple[str, str], Coalescer] = {}
        self._conversations: dict[tuple[str, str], str] = {}
        self._announced: set[str] = set()
        self._announcing: dict[str, _Op] = {}
        """Announcements queued and not yet written (``announce`` waits for them)."""
        self._ops: deque[_Op] = deque()
        self._wake = anyio.Event()
        self._fenced_keys: set[str] = set()
        self._turn_of: dict[str, tuple[str, str]] = {}
        """Live turns' keys -> (conversation, turn), to announce again after a restore."""
        self._anchors: dict[str, dict[str, str]] = {}
        self._speaking: dict[str, set[str]] = {}
        """Live turns' keys -> the executions that wrote and have not ended."""
        self.restores = 0
        self.entries_written = 0
        self.fenced_out = 0
        self.write_errors = 0
        self.batch_calls = 0

    async def _start_tasks(self, group: anyio.abc.TaskGroup) -> None:
        group.start_soon(self._run)
        group.start_soon(self._watch_server)

    async def _watch_server(self) -> None:
        """Every ``probe_interval``, ask Redis its run id (``INFO server``: one command per
        node, however many turns). A new one means Redis restarted, with no data or an older
        snapshot: the writer checks every live turn (``check``), so a turn that writes nothing
        for a while (a tool running, an approval awaited) is restored too, not only at its next
        write, and a log an older snapshot left short is found (no write would find it)."""
        while True:
            server = await server_id(self._redis)  # None: Redis is away, ask again
            if server is not None:
                if self._server is not None and server != self._server:
                    self._check_due = True
                self._server = server
            if self._check_due and not any(op.kind == "check" for op in self._ops):
                self._queue(_Op("", "", "check"))
            await anyio.sleep(self.probe_interval)

    async def _check(self) -> None:
        """Restore each live turn Redis lost (its announcement or some entry); ask again at the
        next probe when Redis cannot answer."""
        keys = [
            key
            for key in self._turn_of
            if key not in self._fenced_keys and key not in self._announcing
        ]
        try:
            lost = await self._log.incomplete(keys) if keys else []
        except (OSError, RedisError) as err:
            log.warning("chunk log check after a Redis restart failed (%s); again soon", err)
            return
        self._check_due = False
        for key in lost:
            await self._restore(key)

    def listener(self, conversation_id: str) -> LogListener:
        return LogListener(self, conversation_id)

    # --- called by the listeners (synchronous, never blocking) ------------------------------

    def push(self, event: StreamEvent) -> None:
        key = self._log.key(event.conversation_id, event.turn_id)
        if key in self._fenced_keys:
            return
        self._announce(event.conversation_id, event.turn_id, key)
        slot = (key, event.execution_id)
        coalescer = self._coalescers.get(slot)
        if coalescer is None:
            coalescer = self._coalescers[slot] = Coalescer(window=self.window)
            self._conversations[slot] = event.conversation_id
            self._speaking.setdefault(key, set()).add(event.execution_id)
            self._turn_of[key] = (event.conversation_id, event.turn_id)
            self._log.track(key, from_start=False)  # again if a sibling's end let it go
            if event.anchor_message_id is not None:
                self._anchors.setdefault(key, {})[event.execution_id] = event.anchor_message_id
                self._queue(
                    _Op(
                        event.conversation_id,
                        key,
                        "anchor",
                        event.execution_id,
                        anchor=event.anchor_message_id,
                    )
                )
        batch = coalescer.push(event.chunk, anyio.current_time(), event.seq)
        if batch is not None:
            self._queue(
                _Op(
                    event.conversation_id,
                    key,
                    "batch",
                    event.execution_id,
                    batch,
                    coalescer.batch_seqs,
                )
            )
        elif coalescer.due is not None:
            self._wake.set()  # the loop's timer must learn the new due time

    async def end(self, result: TerminalResult) -> None:
        key = self._log.key(result.conversation_id, result.turn_id)
        self._announce(result.conversation_id, result.turn_id, key)
        self._flush_slot(key, result.execution_id, result.conversation_id)
        op = _Op(
            result.conversation_id,
            key,
            "end",
            result.execution_id,
            result=result,
            written=anyio.Event(),
        )
        self._queue(op)
        assert op.written is not None
        with anyio.move_on_after(self.terminal_timeout):
            await op.written.wait()

    async def announce(self, conversation_id: str, turn_id: str) -> None:
        """Announce a just admitted turn and wait until the announcement is written (at most
        the terminal timeout), so a subscriber on any node finds the turn live from the moment
        its submit is acknowledged, before its first chunk."""
        key = self._log.key(conversation_id, turn_id)
        if key in self._fenced_keys:
            return
        self._announce(conversation_id, turn_id, key)
        op = self._announcing.get(key)
        if op is not None and op.written is not None:
            with anyio.move_on_after(self.terminal_timeout):
                await op.written.wait()

    def _announce(self, conversation_id: str, turn_id: str, key: str) -> None:
        if key in self._announced:
            return
        if len(self._announced) > 100_000:  # bounded: turns end long before this many
            self._announced.clear()
        self._announced.add(key)
        self._turn_of[key] = (conversation_id, turn_id)
        self._log.track(key)
        op = _Op(conversation_id, key, "announce", turn_id=turn_id, written=anyio.Event())
        self._announcing[key] = op
        self._queue(op)

    def _flush_slot(self, key: str, execution_id: str, conversation_id: str) -> None:
        coalescer = self._coalescers.pop((key, execution_id), None)
        self._conversations.pop((key, execution_id), None)
        if coalescer is None:
            return
        batch = coalescer.flush()
        if batch is not None:
            self._queue(
                _Op(conversation_id, key, "batch", execution_id, batch, coalescer.batch_seqs)
            )

    def _queue(self, op: _Op) -> None:
        self._ops.append(op)
        self._wake.set()

    # --- the writer task -----------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            self._flush_due()
            if not self._ops:
                due = [c.due for c in self._coalescers.values() if c.due is not None]
                self._wake = anyio.Event()
                if due:
                    with anyio.move_on_after(max(0.0, min(due) - anyio.current_time())):
                        await self._wake.wait()
                else:
                    await self._wake.wait()
                continue
            op = self._ops.popleft()
            if op.kind == "check":
                await self._check()
                continue
            if op.kind != "batch":
                await self._write(op)
                continue
            await self._write_batches(self._take_batches(op))

    def _take_batches(self, first: _Op) -> list[_Op]:
        """``first`` and the next queued batch of each other turn, up to the first op that is
        not a batch (never passed) and ``MANY_BATCHES``; a turn's later batches stay queued, in
        order, at the front."""
        ops, keys, kept = [first], {first.key}, []
        scanned = 0
        while self._ops and len(ops) < MANY_BATCHES and scanned < 4 * MANY_BATCHES:
            if self._ops[0].kind != "batch":
                break
            op = self._ops.popleft()
            scanned += 1
            if op.key in keys:
                kept.append(op)
            else:
                keys.add(op.key)
                ops.append(op)
        self._ops.extendleft(reversed(kept))
        return ops

    def _flush_due(self) -> None:
        now = anyio.current_time()
        for slot, coalescer in list(self._coalescers.items()):
            if coalescer.due is not None and coalescer.due <= now:
                batch = coalescer.flush()
                if batch is not None:
                    key, execution_id = slot
                    conversation_id = self._conversations[slot]
                    seqs = coalescer.batch_seqs
                    self._ops.append(_Op(conversation_id, key, "batch", execution_id, batch, seqs))

    async def _write(self, op: _Op) -> None:
        backoff = 0.05
        try:
            while True:
                try:
                    await self._write_once(op)
                    return
                except DataLost:
                    await self._restore(op.key)
                except FencedOut:
                    if self._recover is not None and await self._recover(op.conversation_id):
                        continue  # the lease had vanished with Redis's data: re-taken, retry
                    self._fence_out(op)
                    return
                except (OSError, RedisError) as err:
                    self.write_errors += 1
                    log.warning("chunk log write failed (%s); retrying in %.2f s", err, backoff)
                    await anyio.sleep(backoff)
                    backoff = min(backoff * 2, _MAX_BACKOFF)
        finally:
            if op.kind == "announce":
                self._announcing.pop(op.key, None)
            if op.written is not None:
                op.written.set()

    def _fence_out(self, op: _Op) -> None:
        """The turn's lease is lost for good: drop its writes from now on."""
        self.fenced_out += 1
        self._fenced_keys.add(op.key)
        self._forget(op.key)  # another node owns the turn now
        if len(self._fenced_keys) > 10_000:
            self._fenced_keys.pop()
        log.warning("chunk log write refused: the lease of %r is lost", op.conversation_id)

    def _guard(self, conversation_id: str) -> tuple[str, str] | None:
        fence = self._fence_of(conversation_id)
        return None if fence is None else (self._lease_key(conversation_id), fence.value)

    async def _write_batches(self, ops: list[_Op]) -> None:
        """Write ``ops`` (batches) in one call; retry what failed, in order, until written or
        fenced out for good."""
        backoff = 0.05
        pending = ops
        while True:
            pending = [op for op in pending if op.key not in self._fenced_keys]
            if not pending:
                return
            writes = [
                Append(op.key, op.execution_id, op.chunks, op.seqs, self._guard(op.conversation_id))
                for op in pending
            ]
            self.batch_calls += 1
            try:
                answers = await self._log.append_many(writes)
            except (OSError, RedisError) as err:
                self.write_errors += 1
                log.warning("chunk log write failed (%s); retrying in %.2f s", err, backoff)
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
                continue
            await self._keep_feed()
            retry: list[_Op] = []
            failed: BaseException | None = None
            recovered: dict[str, bool] = {}
            lost: list[str] = []
            for op, answer in zip(pending, answers, strict=True):
                if isinstance(answer, str):
                    self.entries_written += 1
                elif isinstance(answer, DataLost):
                    if op.key not in lost:
                        lost.append(op.key)
                    retry.append(op)
                elif isinstance(answer, FencedOut):
                    if op.key in self._fenced_keys:
                        continue
                    conversation = op.conversation_id
                    if conversation not in recovered:
                        recovered[conversation] = self._recover is not None and bool(
                            await self._recover(conversation)
                        )
                    if recovered[conversation]:
                        retry.append(op)  # the lease had vanished with Redis's data: re-taken
                    else:
                        self._fence_out(op)
                else:
                    failed = failed or answer
                    retry.append(op)
            for key in lost:
                await self._restore(key)  # before anything new lands in the empty log
            if failed is not None:
                self.write_errors += 1
                log.warning("chunk log write failed (%s); retrying in %.2f s", failed, backoff)
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
            pending = retry

    async def _keep_feed(self) -> None:
        """Give this writer's feed its TTL again when due (after a write, so the feed exists):
        it expires once this writer is gone. A failure waits for the next write."""
        if anyio.current_time() < self._feed_kept_until:
            return
        try:
            await self._log.keep_feed()
        except (OSError, RedisError) as err:
            log.warning("could not give the chunk log's feed its TTL: %s", err)
            return
        self._feed_kept_until = anyio.current_time() + FEED_TTL / 3

    async def _write_once(self, op: _Op) -> None:
        guard = self._guard(op.conversation_id)
        if op.kind == "announce":
            turn_id = op.turn_id
            payload = orjson.dumps({"node": self.node_id, "turn": turn_id, "key": op.key})
            anchors = anchors_key(op.key)
            # One round trip; no MULTI/EXEC (two more commands): Redis runs a connection's
            # commands in order, so the mark is set before any node can find the turn, and a
            # write that failed half way is written whole again.
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.hset(anchors, FEED_NAMED, self._log.feed)  # before any node finds the turn
                pipe.expire(anchors, _ANCHORS_TTL)
                pipe.xadd(
                    turns_key(self.prefix, op.conversation_id),
                    {"e": turn_id, "n": self.node_id},
                    maxlen=_TURNS_MAXLEN,
                    approximate=True,
                )
                pipe.hset(live_key(self.prefix), op.conversation_id, payload)
                await pipe.execute()
            return
        if op.kind == "anchor":
            anchors = anchors_key(op.key)
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.hset(anchors, op.execution_id, op.anchor)
                pipe.expire(anchors, _ANCHORS_TTL)
                await pipe.execute()
            return
        if op.kind == "restore":
            await self._log.restore(op.key, guard)
            return
        result = op.result  # "end" (``_write_batches`` writes the batches)
        assert result is not None
        await self._log.end(
            op.key,
            op.execution_id,
            result.status,
            done=result.is_conversation_done,
            error=result.error,
            reason=result.reason,
            fence=guard,
        )
        self.entries_written += 1
        await self._redis.expire(anchors_key(op.key), max(1, round(self._log.ttl)))
        speaking = self._speaking.get(op.key)
        if speaking is not None:
            speaking.discard(op.execution_id)
        if result.is_conversation_done or not speaking:
            self._forget(op.key)
        if result.is_conversation_done:
            await hdel_if_turn(self._redis, live_key(self.prefix), op.conversation_id, op.key)

    def _forget(self, key: str) -> None:
        """The turn ended: nothing of it is kept for a restore any more."""
        self._log.forget_turn(key)
        self._turn_of.pop(key, None)
        self._anchors.pop(key, None)
        self._speaking.pop(key, None)

    async def _restore(self, key: str) -> None:
        """Redis came back without the live turn ``key``: announce it again (its turn list
        entry, the live hash, the feed mark), write its rows' anchors again, then every entry
        written so far (``RedisChunkLog.restore``), before any new entry, so a subscriber that
        attaches now replays the answer from its start. Each step is a write of its own
        (retried, fenced and dropped with a lost lease as any write)."""
        turn = self._turn_of.get(key)
        if turn is None:
            return
        conversation_id, turn_id = turn
        if not await self._hold_lease(conversation_id, key):
            return
        self.restores += 1
        log.warning("chunk log %s was lost with Redis's data; writing it again", key)
        await self._write(_Op(conversation_id, key, "announce", turn_id=turn_id))
        for execution_id, anchor in self._anchors.get(key, {}).items():
            await self._write(_Op(conversation_id, key, "anchor", execution_id, anchor=anchor))
        await self._write(_Op(conversation_id, key, "restore"))

    async def _hold_lease(self, conversation_id: str, key: str) -> bool:
        """Before a lost turn is announced again: its lease must be this node's, taken again
        first when it vanished with Redis's data. Else another node's takeover sweep would
        find the turn live, its lease free and its owner's heartbeat gone (Redis lost it too,
        until the next beat), and take over a turn that is still running here. False: not
        restored now (the lease is another node's: the turn is fenced out; or Redis cannot
        answer: the next write or check finds the loss again)."""
        fence = self._fence_of(conversation_id)
        if fence is None:
            return True  # an unfenced writer (tests, a single node's log)
        try:
            held: Any = await self._redis.get(self._lease_key(conversation_id))
            if held is None and self._recover is not None:
                return await self._recover(conversation_id) is not None or self._lost(key)
        except (OSError, RedisError) as err:
            log.warning("chunk log restore of %s waits: %s", key, err)
            self._check_due = True
            return False
        if held is not None and as_text(held) == fence.value:
            return True
        return self._lost(key)

    def _lost(self, key: str) -> bool:
        turn = self._turn_of.get(key)
        if turn is not None:
            self._fence_out(_Op(turn[0], key, "restore"))
        return False


_HDEL_IF: Final = """
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v and string.find(v, ARGV[2], 1, true) then return redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
"""


_HDEL_IF_SHA: Final = hashlib.sha1(_HDEL_IF.encode()).hexdigest()


async def hdel_if_turn(redis: Redis, key: str, field_: str, turn_key: str) -> None:
    """Remove the conversation's live entry only if it still names this turn (by the script's
    digest; its text is sent only when Redis's script cache does not hold it)."""
    try:
        await redis.evalsha(_HDEL_IF_SHA, 1, key, field_, turn_key)
    except NoScriptError:
        await redis.eval(_HDEL_IF, 1, key, field_, turn_key)


class LogListener(BaseListener):
    """A stream's chunks and terminals to the node's ``LogWriter`` (cleanup phase)."""

    terminal_phase: TerminalPhase | None = "cleanup"

    def __init__(self, writer: LogWriter, conversation_id: str) -> None:
        super().__init__(f"chunk-log:{conversation_id}")
        self._writer = writer

    def on_chunk(self, event: StreamEvent) -> None:
        self._writer.push(event)

    async def on_done(self, result: TerminalResult) -> None:
        await self._writer.end(result)

    async def on_paused(self, result: TerminalResult) -> None:
        await self._writer.end(result)

    async def on_error(self, result: TerminalResult) -> None:
        await self._writer.end(result)
