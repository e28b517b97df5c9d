"""``RedisChunkLog``: a turn's chunks in a Redis Stream, readable and resumable from any node.

Contract (``docs/lifecycles/cluster.md``):

* One Redis Stream per turn, ``<prefix>:log:<conversation>:<turn>``. Each entry holds one batch
  of one execution's chunks (``e``: the execution id, ``c``: the batch as a JSON array, ``s``:
  the owner's seq of each chunk as a JSON array), as the ``Coalescer`` produced it; an
  execution's end is an entry with ``t`` (its terminal status), ``d`` (``1`` when the
  conversation is done), and optionally ``x`` (the serialized error, JSON), ``r`` (the
  reason of a pause) and ``n`` (``<turn>/<execution>``: the execution that answers again in its
  place, written by a takeover with ``on_owner_loss = "retry"``), and no chunks. The entry's
  stream id (``<ms>-<n>``) orders the log; the seqs are the cursors clients see
  (``<turn>/<seq>``), the same on every node.
* Fenced writes: given the writer's ``Fence``, ``append``/``end`` run as one Lua script that
  writes only while the conversation's lease still holds exactly that fence, so an owner that
  lost its lease appends nothing after its successor's terminal (``FencedOut``).
* ``append`` writes with ``MAXLEN ~ maxlen`` (the bound of one turn's log) and returns the id.
  ``end`` writes the terminal entry and sets the stream's TTL, so a finished turn's log stays
  readable for late subscribers and resumes for ``ttl`` seconds, then disappears.
* ``read(key, after)`` returns the entries after a cursor (``"0"``: from the start), in order;
  folding every batch of an execution rebuilds exactly the message a local subscriber saw.

The writer is the turn's owner (it holds the lease); readers never write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import orjson

from drupe.chunks.types import Chunk

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = [
    "DEFAULT_LOG_TTL",
    "FencedOut",
    "DEFAULT_MAXLEN",
    "LogEntry",
    "RedisChunkLog",
    "decode_entry",
    "log_key",
]

DEFAULT_MAXLEN: Final = 100_000
"""Entries one turn's log keeps (approximate trimming); a batch is up to 25 ms of text."""

DEFAULT_LOG_TTL: Final = 300.0
"""Seconds a finished turn's log stays readable."""


def log_key(prefix: str, conversation_id: str, turn_id: str) -> str:
    """The Redis key of one turn's chunk log."""
    return f"{prefix}:log:{conversation_id}:{turn_id}"


class FencedOut(Exception):
    """The writer's lease is gone: the write was refused."""


_FENCED_XADD: Final = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return false end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', unpack(ARGV, 4))
if ARGV[3] ~= '' then redis.call('EXPIRE', KEYS[1], ARGV[3]) end
return id
"""


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One entry: its stream id, the execution, its chunks (and their seqs) or its terminal."""

    cursor: str
    execution_id: str
    chunks: tuple[Chunk, ...] = ()
    terminal: str | None = None
    seqs: tuple[int, ...] = ()
    done: bool = False
    """For a terminal entry: the conversation is done (no sibling runs, no chained turn)."""
    error: dict[str, Any] | None = None
    reason: str | None = None
    retried_as: tuple[str, str] | None = None
    """For a terminal entry: ``(turn, execution)`` of the new attempt that replaces it."""


def decode_entry(entry_id: Any, fields: dict[Any, Any]) -> LogEntry:
    """One raw stream entry (as ``XRANGE``/``XREAD`` return it) as a ``LogEntry``."""

    def text(value: Any) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    named = {text(k): v for k, v in fields.items()}
    terminal = named.get("t")
    retried_as: tuple[str, str] | None = None
    if "n" in named:
        turn, _, execution = text(named["n"]).partition("/")
        retried_as = (turn, execution)
    return LogEntry(
        cursor=text(entry_id),
        execution_id=text(named.get("e", b"")),
        chunks=tuple(orjson.loads(named["c"])) if "c" in named else (),
        terminal=None if terminal is None else text(terminal),
        seqs=tuple(orjson.loads(named["s"])) if "s" in named else (),
        done=text(named.get("d", b"0")) == "1",
        error=orjson.loads(named["x"]) if "x" in named else None,
        reason=text(named["r"]) if "r" in named else None,
        retried_as=retried_as,
    )


class RedisChunkLog:
    """Append and read turn logs through one Redis client."""

    def __init__(
        self,
        redis: Redis,
        *,
        prefix: str = "drupe",
        maxlen: int = DEFAULT_MAXLEN,
        ttl: float = DEFAULT_LOG_TTL,
    ) -> None:
        self._redis = redis
        self.prefix = prefix
        self.maxlen = maxlen
        self.ttl = ttl
        self._fenced_xadd = redis.register_script(_FENCED_XADD)

    def key(self, conversation_id: str, turn_id: str) -> str:
        return log_key(self.prefix, conversation_id, turn_id)

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
        fields: dict[str, Any] = {"e": execution_id, "c": orjson.dumps(chunks)}
        if seqs is not None:
            fields["s"] = orjson.dumps(seqs)
        return await self._write(key, fields, fence=fence, expire=False)

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
        fields: dict[str, Any] = {"e": execution_id, "t": status, "d": "1" if done else "0"}
        if error is not None:
            fields["x"] = orjson.dumps(error)
        if reason is not None:
            fields["r"] = reason
        if retried_as is not None:
            fields["n"] = "/".join(retried_as)
        return await self._write(key, fields, fence=fence, expire=True)

    async def _write(
        self,
        key: str,
        fields: dict[str, Any],
        *,
        fence: tuple[str, str] | None,
        expire: bool,
    ) -> str:
        ttl = max(1, round(self.ttl))
        if fence is not None:
            flat: list[Any] = []
            for name, value in fields.items():
                flat.extend((name, value))
            lease_key, value = fence
            entry_id = await self._fenced_xadd(
                keys=[key, lease_key], args=[value, self.maxlen, ttl if expire else "", *flat]
            )
            if entry_id is None:
                raise FencedOut(f"the lease {lease_key!r} is no longer {value!r}")
        elif expire:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.xadd(key, fields, maxlen=self.maxlen, approximate=True)  # type: ignore[arg-type]
                pipe.expire(key, ttl)
                entry_id, _ = await pipe.execute()
        else:
            entry_id = await self._redis.xadd(key, fields, maxlen=self.maxlen, approximate=True)  # type: ignore[arg-type]
        return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)

    async def tail(self, key: str, count: int = 16) -> list[LogEntry]:
        """The newest ``count`` entries, oldest first (empty when the log does not exist)."""
        rows: Any = await self._redis.xrevrange(key, max="+", min="-", count=count)
        return [decode_entry(entry_id, fields) for entry_id, fields in reversed(rows or ())]

    async def read(self, key: str, after: str = "0", count: int | None = None) -> list[LogEntry]:
        """The entries after ``after`` (exclusive), oldest first."""
        start = "-" if after in ("0", "0-0") else f"({after}"
        rows: Any = await self._redis.xrange(key, min=start, max="+", count=count)
        return [decode_entry(entry_id, fields) for entry_id, fields in rows or ()]
