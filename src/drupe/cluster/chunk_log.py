"""``RedisChunkLog``: a turn's chunks in a Redis Stream, readable and resumable from any node.

Contract (``docs/lifecycles/cluster.md``):

* One Redis Stream per turn, ``<prefix>:log:<conversation>:<turn>``. Each entry holds one batch
  of one execution's chunks (``e``: the execution id, ``c``: the batch as a JSON array), as the
  ``Coalescer`` produced it; an execution's end is an entry with ``t`` (its terminal status) and
  no chunks. The entry's stream id (``<ms>-<n>``) is the resume cursor on every node.
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


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One entry: its stream id (the cursor), the execution, its chunks or its terminal status."""

    cursor: str
    execution_id: str
    chunks: tuple[Chunk, ...] = ()
    terminal: str | None = None


def decode_entry(entry_id: Any, fields: dict[Any, Any]) -> LogEntry:
    """One raw stream entry (as ``XRANGE``/``XREAD`` return it) as a ``LogEntry``."""

    def text(value: Any) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    named = {text(k): v for k, v in fields.items()}
    terminal = named.get("t")
    return LogEntry(
        cursor=text(entry_id),
        execution_id=text(named.get("e", b"")),
        chunks=tuple(orjson.loads(named["c"])) if "c" in named else (),
        terminal=None if terminal is None else text(terminal),
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

    def key(self, conversation_id: str, turn_id: str) -> str:
        return log_key(self.prefix, conversation_id, turn_id)

    async def append(self, key: str, execution_id: str, chunks: list[Chunk]) -> str:
        """Write one batch; return its cursor."""
        entry_id = await self._redis.xadd(
            key,
            {"e": execution_id, "c": orjson.dumps(chunks)},
            maxlen=self.maxlen,
            approximate=True,
        )
        return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)

    async def end(self, key: str, execution_id: str, status: str) -> str:
        """Write an execution's terminal entry and start the log's TTL; return its cursor."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.xadd(key, {"e": execution_id, "t": status}, maxlen=self.maxlen, approximate=True)
            pipe.expire(key, max(1, round(self.ttl)))
            entry_id, _ = await pipe.execute()
        return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)

    async def read(self, key: str, after: str = "0", count: int | None = None) -> list[LogEntry]:
        """The entries after ``after`` (exclusive), oldest first."""
        start = "-" if after in ("0", "0-0") else f"({after}"
        rows: Any = await self._redis.xrange(key, min=start, max="+", count=count)
        return [decode_entry(entry_id, fields) for entry_id, fields in rows or ()]
