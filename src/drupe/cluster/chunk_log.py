"""``RedisChunkLog``: a turn's chunks in a Redis Stream, readable and resumable from any node.

Contract (``docs/lifecycles/cluster.md``, "The chunk log"):

* One Redis Stream per turn, ``<prefix>:log:<conversation>:<turn>``. Each entry holds one batch
  of one execution's chunks, as the ``Coalescer`` produced it, or one execution's end, in ONE
  field ``p`` in the compact encoding of ``drupe.cluster.log_encoding`` (which also decodes).
  Execution ids and part ids are numbered in the turn's hash ``<log key>:anchors`` (fields
  ``#<n>`` -> the string): a writer registers a string (Redis function ``dl1n``, in
  ``drupe.cluster.log_functions``) BEFORE the first entry that uses it, so an entry that exists
  always has its numbers registered and ANY cursor decodes. Readers cache the map per key and
  read it again (``HGETALL``) when they meet an unknown number; a number that is still unknown
  (the hash was lost) decodes as ``#<n>`` with a warning, never an error.
* Fenced writes: given the writer's ``Fence``, ``append``/``end`` run as one Redis function
  (``FCALL dl1``, library ``drupe_log_1``, loaded when Redis answers that it has none) that
  writes only while the conversation's lease still holds exactly that fence, so an owner that
  lost its lease appends nothing after its successor's terminal (``FencedOut``). The wire
  carries only the fence's token (``|<token>``): tokens are unique per grant of a
  conversation's lease, and the function compares it with the token the lease holds.
* ``append`` trims with ``MAXLEN ~ maxlen`` on every ``trim_every``-th write to a key (so a log
  holds at most about ``maxlen + trim_every`` entries) and returns the id. ``append_many``
  writes many batches (``Append``s, to any turns, each with its own fence) in ONE call (``FCALL
  dl3m``): the same entries, fencing and trimming as one ``append`` each, in order, and one
  answer per write (its id, or the ``FencedOut``/``RedisError`` of that write alone). The call
  names each turn by a short number in this writer's registry (``registry``, a Redis hash: the
  turn's log, lease, fence token, feed and maxlen, registered in the call that first needs it,
  again when its fence changes, dropped with the call after its ``end``); a turn the registry
  lost (Redis lost data) is registered again and only its writes are sent again.
  ``end`` writes the terminal entry and sets the stream's TTL, so a finished turn's log stays
  readable for late subscribers and resumes for ``ttl`` seconds, then disappears.
* ``read(key, after)`` returns the entries after a cursor (``"0"``: from the start), in order;
  folding every batch of an execution rebuilds exactly the message a local subscriber saw.
* A writer registers its strings again (asking for the same numbers) after any refused or
  failed write and after Redis lost the function library, so a Redis that lost its data gets
  the map back before the first entry written after it; ``forget()`` (a reader's failed read)
  drops the cached maps.

* ``track(key)`` keeps every entry then written to that turn, as written, until
  ``forget_turn(key)``. A write to a tracked turn that finds Redis without its data (the
  registry does not know the turn, or the functions were gone) writes nothing and answers or
  raises ``DataLost``; ``restore(key, fence)`` then writes the kept entries again, in order,
  under the same string numbers, when the log lacks some of them (gone, or a shorter log left
  by an older snapshot, which it replaces; ``restored`` counts that). ``incomplete(keys)``
  names the tracked turns whose announcement or entries Redis no longer holds (the writer asks
  after Redis restarted, so an idle turn is restored too).

The writer is the turn's owner (it holds the lease); readers never write.
"""

from __future__ import annotations

import logging
import secrets
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from redis.exceptions import RedisError, ResponseError

from drupe.chunks.types import Chunk
from drupe.cluster.log_encoding import (
    LogEntry,
    UnknownExecution,
    as_text,
    decode_entry,
    encode_batch,
    encode_end,
    msgpack_array,
    names_of,
    run_part,
)
from drupe.cluster.log_functions import APPEND_FED, APPEND_REGISTERED, INTERN, LIBRARIES

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = [
    "Append",
    "DEFAULT_LOG_TTL",
    "DEFAULT_MAXLEN",
    "DEFAULT_TRIM_EVERY",
    "FEED_MARK",
    "FEED_NAMED",
    "FEED_SHARDS",
    "DataLost",
    "FencedOut",
    "RedisChunkLog",
    "anchors_key",
    "feed_key",
    "log_key",
]

log = logging.getLogger(__name__)

DEFAULT_MAXLEN: Final = 100_000
"""Entries one turn's log keeps (approximate trimming); a batch is up to 25 ms of text."""

DEFAULT_TRIM_EVERY: Final = 64
"""Appends to a key between two ``MAXLEN`` trims."""

DEFAULT_LOG_TTL: Final = 300.0
"""Seconds a finished turn's log stays readable."""

_CACHE_BOUND: Final = 10_000

FEED_SHARDS: Final = 8
"""Earlier versions' feeds: a log's entries fed to ``feed_key(prefix, crc32(log key) % 8)``."""

FEED_MARK: Final = "~feed"
"""Earlier versions' mark: the field of a turn's hash (``<log key>:anchors``) that says its
writer feeds every entry to its shard's feed (``shard_feed_of``)."""

FEED_NAMED: Final = "~fd"
"""This version's mark: the field of a turn's hash whose value is the feed its writer feeds
every entry to (the writer's own, ``RedisChunkLog.feed``), written with the turn's
announcement: a reader follows such a turn through that feed. (A writer of this version does
not set ``FEED_MARK``: a reader of an earlier version reads its turns' logs directly.)"""

FEED_TTL: Final = 60
"""Seconds a writer's feed outlives the writer's last look at it (``keep_feed``)."""


def log_key(prefix: str, conversation_id: str, turn_id: str) -> str:
    """The Redis key of one turn's chunk log."""
    return f"{prefix}:log:{conversation_id}:{turn_id}"


def feed_key(prefix: str, shard: int | str) -> str:
    """The Redis key of one feed: every entry of the logs of its shard (earlier versions) or
    of its writer (``w<4 random hex digits>``), as written."""
    return f"{prefix}:feed:{shard}"


def anchors_key(log_key: str) -> str:
    """The turn's hash: execution id -> the row it fills (``anchor_message_id``), and the
    execution numbers of the log's entries (``#<n>`` -> execution id)."""
    return f"{log_key}:anchors"


class FencedOut(Exception):
    """The writer's lease is gone: the write was refused."""


class DataLost(Exception):
    """Redis lost a tracked turn's log (it came back without its data): nothing was written,
    so the writer can restore the turn (``restore``) before anything new lands in it."""


@dataclass(frozen=True, slots=True)
class Append:
    """One batch for ``RedisChunkLog.append_many``: ``append``'s arguments."""

    key: str
    execution_id: str
    chunks: list[Chunk]
    seqs: list[int] | None = None
    fence: tuple[str, str] | None = None
    payload: bytes | None = None
    """An entry as it was written before (``restore``): sent as it is, not recorded again."""


@dataclass(eq=False, slots=True)
class _Turn:
    """A turn in the writer's registry: its number and what is registered under it."""

    number: int
    fence: tuple[str, str]
    """``(lease key, token)`` registered (empty strings: unfenced)."""
    value: bytes
    registered: bool = False
    was_registered: bool = False
    """Registered once already: registering it again checks that its log is still there."""


@dataclass(eq=False, slots=True)
class _Kept:
    """A tracked turn: every entry written to it, in order, as written (each behind its length,
    4 bytes), and the string numbers they use (not subject to the caches' bound)."""

    entries: bytearray = field(default_factory=bytearray)
    numbers: dict[str, int] = field(default_factory=dict)
    count: int = 0
    """Entries kept."""
    whole: bool = True
    """Kept from the turn's first entry on (a turn tracked again mid-way keeps only a tail)."""

    def split(self) -> list[bytes]:
        out: list[bytes] = []
        at = 0
        while at < len(self.entries):
            size = int.from_bytes(self.entries[at : at + 4], "big")
            out.append(bytes(self.entries[at + 4 : at + 4 + size]))
            at += 4 + size
        return out


class RedisChunkLog:
    """Append and read turn logs through one Redis client."""

    def __init__(
        self,
        redis: Redis,
        *,
        prefix: str = "drupe",
        maxlen: int = DEFAULT_MAXLEN,
        ttl: float = DEFAULT_LOG_TTL,
        trim_every: int = DEFAULT_TRIM_EVERY,
    ) -> None:
        self._redis = redis
        self.prefix = prefix
        self.maxlen = maxlen
        self.ttl = ttl
        self.trim_every = max(1, trim_every)
        self._numbers: dict[tuple[str, str], tuple[int, bool]] = {}
        """(key, string) -> (its number, registered since the last failed write)."""
        self._names: dict[str, dict[int, str]] = {}
        self._appends: dict[str, int] = {}
        self.registry = f"{prefix}:writer:{secrets.token_hex(8)}"
        """This writer's registry of turns (``append_many``)."""
        self.feed = feed_key(prefix, f"w{secrets.token_hex(2)}")
        """This writer's feed: every entry it writes to its own turns, one feed entry per call.
        Its name is short (every read of it names it); two writers that drew the same one share
        it, which only costs their readers the other's items (a feed item names its log)."""
        self._feeds: dict[str, str] = {}
        """Other writers' turns -> their feeds (``_feed_for``: single writes, as a takeover's)."""
        self._turns: dict[str, _Turn] = {}
        self._next_turn = 0
        self._gone: list[int] = []
        self._tracked: dict[str, _Kept] = {}
        """Tracked turns (``track``): what a ``restore`` writes again."""
        self.restored = 0
        self._feed_prefix = f"{prefix}:feed:"  # every feed_key(prefix, n) starts so

    def key(self, conversation_id: str, turn_id: str) -> str:
        return log_key(self.prefix, conversation_id, turn_id)

    def shard_feed_of(self, key: str) -> str:
        """The feed an earlier version's writer feeds the entries of the log ``key`` to."""
        return feed_key(self.prefix, zlib.crc32(key.encode()) % FEED_SHARDS)

    def is_feed(self, key: str) -> bool:
        """Whether ``key`` names one of this prefix's feeds."""
        return key.startswith(self._feed_prefix)

    async def fed(self, key: str) -> str | None:
        """The feed the turn's writer feeds its entries to: the one its announcement named
        (``FEED_NAMED``), its shard's for an earlier version's writer (``FEED_MARK``), or
        ``None`` (not fed: read the log itself)."""
        named, marked = await self._redis.hmget(anchors_key(key), [FEED_NAMED, FEED_MARK])
        if named:
            return as_text(named)
        return self.shard_feed_of(key) if marked else None

    async def keep_feed(self) -> None:
        """Give this writer's feed its TTL again (``FEED_TTL``): its writer calls it at least
        every ``FEED_TTL / 3`` seconds while it writes, so a feed whose writer is gone expires."""
        await self._redis.expire(self.feed, FEED_TTL)

    async def _feed_for(self, key: str) -> str:
        """The feed a single write to ``key`` feeds: this writer's for its own turns, else the
        one the turn's announcement named (a takeover writing another node's turn)."""
        if key in self._turns or key in self._tracked:
            return self.feed
        feed = self._feeds.get(key)
        if feed is None:
            feed = await self.fed(key) or self.feed
            if len(self._feeds) > _CACHE_BOUND:
                self._feeds.clear()
            self._feeds[key] = feed
        return feed

    async def append(
        self,
        key: str,
        execution_id: str,
        chunks: list[Chunk],
        seqs: list[int] | None = None,
        *,
        fence: tuple[str, str] | None = None,
    ) -> str:
        """Write one batch; return its entry id. ``fence``: ``(lease key, lease value)``."""
        part = run_part(chunks, seqs)

        def payload(numbers: Mapping[str, int]) -> bytes:
            parts = None if part is None else numbers
            return encode_batch(numbers.get(execution_id, 0), chunks, seqs, parts)

        strings = [s for s in (execution_id, part) if s]
        return await self._write(key, strings, payload, fence=fence, expire=False)

    async def append_many(
        self, writes: Sequence[Append]
    ) -> list[str | FencedOut | RedisError | DataLost]:
        """Write every batch of ``writes`` in one call, in order; one answer per write: its
        entry id, ``FencedOut`` (that write's lease is gone) or the ``RedisError`` of its own
        ``XADD``. A failure of the call itself (the connection, Redis) raises: then none or
        some of the writes may have run, as with ``append``.

        The call names no turn's keys: each turn is registered once (its log, lease, fence
        token and feed, under a short number in this writer's registry hash) and a write names
        its number. A turn the registry lost (Redis lost its data) is registered again and
        its writes sent again, in a second call."""
        answers: list[str | FencedOut | RedisError | DataLost | None] = [None] * len(writes)
        trims = [self._trim(write.key) for write in writes]
        pending = list(range(len(writes)))
        for _ in range(3):
            if not pending:
                break
            got = await self._append_registered(
                [writes[i] for i in pending], [trims[i] for i in pending]
            )
            unknown = []
            for i, answer in zip(pending, got, strict=True):
                if answer is None:
                    unknown.append(i)
                else:
                    answers[i] = answer
            pending = unknown
        for i in pending:
            answers[i] = ResponseError("the writer's registry did not keep this turn")
        return [answer for answer in answers if answer is not None]

    async def _append_registered(
        self, writes: Sequence[Append], trims: Sequence[int | str]
    ) -> list[str | FencedOut | RedisError | DataLost | None]:
        """One ``FCALL dl3m`` of ``writes``; ``None`` for a write whose turn was not found in
        the registry (it is registered again on its next call)."""
        for attempt in (1, 2):
            registering: list[_Turn] = []
            checks: list[bool] = []
            turns: list[_Turn] = []
            payloads: list[bytes] = []
            try:
                blob: list[int | bytes] = []
                for write, trim in zip(writes, trims, strict=True):
                    payload = write.payload
                    if payload is None:
                        part = run_part(write.chunks, write.seqs)
                        strings = [s for s in (write.execution_id, part) if s]
                        numbers = await self._intern(write.key, strings)
                        payload = encode_batch(
                            numbers.get(write.execution_id, 0),
                            write.chunks,
                            write.seqs,
                            None if part is None else numbers,
                        )
                    payloads.append(payload)
                    turn = self._turn(write)
                    turns.append(turn)
                    if not turn.registered and turn not in registering:
                        registering.append(turn)
                        # A turn registered again (its fence changed, or the registry lost it)
                        # that has entries: its log must still be there, else Redis lost it
                        # (not when the write is the restore itself).
                        checks.append(
                            turn.was_registered
                            and write.payload is None
                            and self._has_entries(write.key)
                        )
                    blob += [2 * turn.number + (trim != ""), payload]
                registrations: list[int | bytes] = []
                for t, check in zip(registering, checks, strict=True):
                    registrations += [t.number, t.value, int(check)]
                dropped = len(self._gone)
                gone = ",".join(map(str, self._gone))
                got: Any = await self._redis.fcall(
                    APPEND_REGISTERED,
                    1,
                    self.registry,
                    msgpack_array(blob),
                    msgpack_array(registrations) if registrations else b"",
                    gone,
                )
            except ResponseError as err:
                if attempt == 2 or "function not found" not in str(err).lower():
                    for write in writes:
                        self._unconfirm(write.key)
                    raise
                await self._load_functions()
                continue
            except (OSError, RedisError):
                for write in writes:
                    self._unconfirm(write.key)
                raise
            for turn in registering:
                turn.registered = turn.was_registered = True
            del self._gone[:dropped]
            out: list[str | FencedOut | RedisError | DataLost | None] = []
            for write, turn, payload, answer in zip(writes, turns, payloads, got, strict=True):
                if answer == 0:
                    self._unconfirm(write.key)
                    lease = write.fence and write.fence[0]
                    out.append(FencedOut(f"the lease {lease!r} no longer holds this fence"))
                    continue
                text = as_text(answer)
                if text == "?":
                    turn.registered = False
                    self._unconfirm(write.key)  # Redis lost data: its numbers too, maybe
                    if write.key in self._tracked and write.payload is None:
                        # a tracked turn: its announcement (and entries, if any) went too
                        out.append(DataLost(f"Redis lost the turn {write.key!r}"))
                    else:
                        out.append(None)
                elif text.startswith("!"):
                    self._unconfirm(write.key)
                    out.append(ResponseError(text[1:]))
                else:
                    out.append(text)
                    if write.payload is None:
                        self._keep(write.key, payload)
            return out
        raise AssertionError("unreachable")

    def track(self, key: str, *, from_start: bool = True) -> None:
        """Keep what is written to the turn ``key`` from now on, so ``restore`` can write it
        again (its owner's writer tracks each live turn until it ends). ``from_start``: nothing
        was written to it before (else only a tail is kept, which never replaces a log)."""
        if len(self._tracked) > _CACHE_BOUND:
            self._tracked.clear()  # turns end long before this many are live
        if key not in self._tracked:
            self._tracked[key] = _Kept(whole=from_start)

    def forget_turn(self, key: str) -> None:
        """Stop tracking ``key`` (its turn ended): its entries are no longer kept here."""
        self._tracked.pop(key, None)

    def _keep(self, key: str, payload: bytes) -> None:
        """Keep an entry just written to ``key`` when the turn is tracked."""
        kept = self._tracked.get(key)
        if kept is not None:
            kept.entries += len(payload).to_bytes(4, "big")
            kept.entries += payload
            kept.count += 1

    def _has_entries(self, key: str) -> bool:
        kept = self._tracked.get(key)
        return kept is not None and bool(kept.entries)

    async def incomplete(self, keys: Sequence[str]) -> list[str]:
        """Those of the tracked turns ``keys`` whose announcement (the feed mark) or some
        entry Redis no longer holds (it restarted without its data, or from an older
        snapshot): one round trip."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.xlen(key)
                pipe.hexists(anchors_key(key), FEED_NAMED)
            got: list[Any] = await pipe.execute()
        out = []
        for i, key in enumerate(keys):
            kept = self._tracked.get(key)
            count = 0 if kept is None else min(kept.count, self.maxlen)
            if not got[2 * i + 1] or int(got[2 * i]) < count:
                out.append(key)
        return out

    async def restore(self, key: str, fence: tuple[str, str] | None) -> int:
        """Write the tracked turn ``key`` again, every entry in order as first written, when
        its log lacks some of them (Redis came back without its data, or from an older
        snapshot: then what is left of the log is replaced); returns the entries written (0
        when the log is whole, or nothing is kept, or only a tail of the turn is kept and its
        log is not empty). Its strings are registered again under the same numbers first, so
        the entries decode as before. Raises ``FencedOut`` or a ``RedisError`` as
        ``append_many`` answers them."""
        kept = self._tracked.get(key)
        if kept is None or not kept.entries:
            return 0
        length = int(await self._redis.xlen(key))
        if length >= min(kept.count, self.maxlen):
            return 0
        if length and not kept.whole:
            log.error("chunk log %s lacks entries and only a tail is kept; left as is", key)
            return 0
        entries = kept.split()
        numbers = dict(kept.numbers)
        self._unconfirm(key)
        try:
            again = await self._intern(key, list(numbers))
        except ResponseError as err:
            if "function not found" not in str(err).lower():
                raise
            await self._load_functions()  # no write found the loss first (an idle turn)
            again = await self._intern(key, list(numbers))
        if again != numbers:
            log.error("chunk log %s: its numbers changed (%s); not restored", key, again)
            self.forget_turn(key)  # its entries no longer decode: go on without them
            return 0
        writes = [Append(key, "", [], None, fence, payload=p) for p in entries]
        if length:
            await self._redis.delete(key)  # its order would be wrong with the lost ones after
        answers = await self._append_registered(writes, [""] * len(writes))
        for answer in answers:
            if isinstance(answer, (FencedOut, RedisError)):
                raise answer
            if answer is None or isinstance(answer, DataLost):
                raise ResponseError(f"the registry lost the turn {key!r} again")
        self.restored += 1
        return len(writes)

    def _turn(self, write: Append) -> _Turn:
        """The registration of ``write``'s turn as it must be now (a new number for a turn
        not seen, the registration redone when its fence changed)."""
        fence = ("", "") if write.fence is None else self._token(write.fence)
        turn = self._turns.get(write.key)
        if turn is not None and turn.fence == fence:
            return turn
        lease_key, token = fence
        value = msgpack_array(
            [
                write.key.encode(),
                lease_key.encode(),
                token.encode(),
                self.feed.encode(),
                b"%d" % self.maxlen,
            ]
        )
        if turn is None:
            if len(self._turns) > _CACHE_BOUND:
                self._turns.clear()  # their numbers stay in the registry until its TTL
            self._next_turn += 1
            turn = self._turns[write.key] = _Turn(self._next_turn, fence, value)
        else:
            turn.fence, turn.value, turn.registered = fence, value, False
        return turn

    async def end(
        self,
        key: str,
        execution_id: str,
        status: str,
        *,
        done: bool = True,
        error: dict[str, Any] | None = None,
        reason: str | None = None,
        retried_as: tuple[str, str] | None = None,
        fence: tuple[str, str] | None = None,
    ) -> str:
        """Write an execution's terminal entry and start the log's TTL; return its entry id.

        ``retried_as``: ``(turn, execution)`` of the new attempt followers move on to."""

        def payload(numbers: Mapping[str, int]) -> bytes:
            number = numbers.get(execution_id, 0)
            return encode_end(
                number, status, done=done, error=error, reason=reason, retried_as=retried_as
            )

        strings = [execution_id] if execution_id else []
        entry_id = await self._write(key, strings, payload, fence=fence, expire=True)
        self._appends.pop(key, None)
        turn = self._turns.pop(key, None)
        if turn is not None and len(self._gone) < _CACHE_BOUND:
            self._gone.append(turn.number)  # dropped from the registry with the next call
        return entry_id

    async def _write(
        self,
        key: str,
        strings: list[str],
        payload: Callable[[Mapping[str, int]], bytes],
        *,
        fence: tuple[str, str] | None,
        expire: bool,
    ) -> str:
        for attempt in (1, 2):
            try:
                numbers = await self._intern(key, strings)
                written = payload(numbers)
                entry_id = await self._append(key, written, fence, expire)
                self._keep(key, written)
                return entry_id
            except ResponseError as err:
                if attempt == 2 or "function not found" not in str(err).lower():
                    self._unconfirm(key)
                    raise
                await self._load_functions()
                if key in self._tracked:
                    raise DataLost(f"Redis lost its functions, and the turn {key!r}") from err
            except (FencedOut, OSError, RedisError):
                self._unconfirm(key)
                raise
        raise AssertionError("unreachable")

    async def _load_functions(self) -> None:
        """Redis lost its functions (a restart without its data): load them again, and register
        every string again before its next use."""
        for library in LIBRARIES:
            await self._redis.function_load(library, replace=True)
        self._unconfirm(None)

    async def _intern(self, key: str, strings: list[str]) -> dict[str, int]:
        """The numbers of ``strings`` in the turn's hash, registering those not confirmed (a
        tracked turn keeps every number its entries use, for ``restore``)."""
        numbers = await self._numbers_of(key, strings)
        kept = self._tracked.get(key)
        if kept is not None:
            kept.numbers.update(numbers)
        return numbers

    async def _numbers_of(self, key: str, strings: list[str]) -> dict[str, int]:
        numbers: dict[str, int] = {}
        missing: list[str] = []
        for string in strings:
            known = self._numbers.get((key, string))
            if known is not None and known[1]:
                numbers[string] = known[0]
            elif string not in missing:
                missing.append(string)
        if not missing:
            return numbers
        args: list[Any] = []
        free = 1 + max(self._names.get(key, {0: ""}))
        for string in missing:
            known = self._numbers.get((key, string))
            if known is None:
                args += [string, free]
                free += 1
            else:
                args += [string, known[0]]  # again after a failure: the same number if free
        got: Any = await self._redis.fcall(INTERN, 1, anchors_key(key), *args)
        if len(self._numbers) > _CACHE_BOUND:
            self._numbers.clear()
        for string, number in zip(missing, got, strict=True):
            numbers[string] = int(number)
            self._numbers[(key, string)] = (int(number), True)
            self._remember(key, {int(number): string})
        return numbers

    async def _append(
        self, key: str, payload: bytes, fence: tuple[str, str] | None, expire: bool
    ) -> str:
        lease_key, token = key, ""
        if fence is not None:
            lease_key, token = self._token(fence)
        ttl = max(1, round(self.ttl)) if expire else ""
        feed = await self._feed_for(key)
        keys = [key, lease_key, feed]
        args = [token, payload, self._trim(key), ttl]
        result: Any = await self._redis.fcall(APPEND_FED, len(keys), *keys, *args)
        if feed != self.feed:  # another writer's feed, which may be gone: not kept for ever
            await self._redis.expire(feed, FEED_TTL, nx=True)
        if result is None:
            raise FencedOut(f"the lease {lease_key!r} is no longer {fence and fence[1]!r}")
        return as_text(result)

    @staticmethod
    def _token(fence: tuple[str, str]) -> tuple[str, str]:
        """``(lease key, what the function compares)``: the wire carries the token only."""
        lease_key, value = fence
        if not value:
            raise ValueError("a fence needs a lease value")
        return lease_key, value[value.rfind("|") :] if "|" in value else value

    def _trim(self, key: str) -> int | str:
        """``maxlen`` on every ``trim_every``-th write to ``key`` (the first too), else ``""``."""
        count = self._appends.get(key, 0)
        if len(self._appends) > _CACHE_BOUND:
            self._appends.clear()
        self._appends[key] = count + 1
        return self.maxlen if count % self.trim_every == 0 else ""

    def _unconfirm(self, key: str | None) -> None:
        """Register the executions of ``key`` (``None``: every key) again on their next write."""
        for slot, (number, _) in list(self._numbers.items()):
            if key is None or slot[0] == key:
                self._numbers[slot] = (number, False)

    def _remember(self, key: str, names: Mapping[int, str]) -> dict[int, str]:
        if key not in self._names and len(self._names) > _CACHE_BOUND:
            self._names.clear()
        known = self._names.setdefault(key, {})
        known.update(names)
        return known

    def forget(self) -> None:
        """Drop the cached execution numbers of every key (after Redis may have lost data)."""
        self._names.clear()
        self._unconfirm(None)

    async def decode(self, key: str, rows: Iterable[tuple[Any, Any]]) -> list[LogEntry]:
        """Raw entries of ``key`` as ``LogEntry``s, reading its execution numbers when needed."""
        names = self._names.get(key)
        out: list[LogEntry] = []
        for entry_id, fields in rows:
            try:
                out.append(decode_entry(entry_id, fields, names))
                continue
            except UnknownExecution:
                pass
            raw: Any = await self._redis.hgetall(anchors_key(key))
            names = self._remember(key, names_of(raw or {}))
            stand_ins = dict(names)
            while True:
                try:
                    out.append(decode_entry(entry_id, fields, stand_ins))
                    break
                except UnknownExecution as err:  # the map was lost (Redis lost data): say so
                    number = int(err.args[0])
                    log.warning("chunk log %s: number %d is not registered", key, number)
                    stand_ins[number] = f"#{number}"
        return out

    async def tail(self, key: str, count: int = 16) -> list[LogEntry]:
        """The newest ``count`` entries, oldest first (empty when the log does not exist)."""
        rows: Any = await self._redis.xrevrange(key, max="+", min="-", count=count)
        return await self.decode(key, reversed(rows or ()))

    async def read(self, key: str, after: str = "0", count: int | None = None) -> list[LogEntry]:
        """The entries after ``after`` (exclusive), oldest first."""
        start = "-" if after in ("0", "0-0") else f"({after}"
        rows: Any = await self._redis.xrange(key, min=start, max="+", count=count)
        return await self.decode(key, rows or ())
