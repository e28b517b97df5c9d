"""``RedisChunkLog``: a turn's chunks in a Redis Stream, readable and resumable from any node.

Contract (``docs/lifecycles/cluster.md``, "The chunk log"):

* One Redis Stream per turn, ``<prefix>:log:<conversation>:<turn>``. Each entry holds one batch
  of one execution's chunks, as the ``Coalescer`` produced it, or one execution's end, in ONE
  field ``p`` (compact encoding, ``encode_batch``/``encode_end``):

  - ``d<n>,<seq>,<k>:<text>``: a batch that is one merged text delta (``r``: reasoning, ``i``:
    tool input) with exactly the keys type, part id and text: its seq, its part id's number
    ``<k>``, and the raw text after the first ``:``, no JSON;
  - ``j<n>[,<seq>...]:<JSON array>``: any other batch, with the owner's seq of each chunk;
  - ``e<n>:<JSON object>``: an execution's end (``t``: status, ``d``: ``1`` when the
    conversation is done, optionally ``x``: the error, ``r``: the reason of a pause, ``n``:
    ``<turn>/<execution>``, the execution that answers again in its place, written by a
    takeover with ``on_owner_loss = "retry"``).

  ``<n>`` is the execution's number in the turn (``0``: the turn-wide terminal, execution id
  ``""``). Execution ids and part ids are numbered in the turn's hash ``<log key>:anchors``
  (fields ``#<n>`` -> the string; one numbering for both): a writer registers a string
  (function ``dl1n``: a known string keeps its number) BEFORE the first entry that uses it, so
  an entry that exists always has its numbers registered and ANY cursor decodes. Readers cache
  the map per key and read it again (``HGETALL``) when they meet an unknown number; a number
  that is still unknown (the hash was lost) decodes as ``#<n>`` with a warning, never an error.
  ``decode_entry`` also reads the plain field form (``e``, ``c``, ``s``, ``t``, ``d``, ``x``,
  ``r``) that the turn lists use. The entry's stream id (``<ms>-<n>``) orders the log; the seqs
  are the cursors clients see (``<turn>/<seq>``), the same on every node.
* Fenced writes: given the writer's ``Fence``, ``append``/``end`` run as one Redis function
  (``FCALL dl1``, library ``drupe_log_1``, loaded when Redis answers that it has none) that
  writes only while the conversation's lease still holds exactly that fence, so an owner that
  lost its lease appends nothing after its successor's terminal (``FencedOut``). The wire
  carries only the fence's token (``|<token>``): tokens are unique per grant of a
  conversation's lease, and the function compares it with the token the lease holds.
* ``append`` trims with ``MAXLEN ~ maxlen`` on every ``trim_every``-th write to a key (so a log
  holds at most about ``maxlen + trim_every`` entries) and returns the id. ``end`` writes the
  terminal entry and sets the stream's TTL, so a finished turn's log stays readable for late
  subscribers and resumes for ``ttl`` seconds, then disappears.
* ``read(key, after)`` returns the entries after a cursor (``"0"``: from the start), in order;
  folding every batch of an execution rebuilds exactly the message a local subscriber saw.
* A writer registers its strings again (asking for the same numbers) after any refused or
  failed write and after Redis lost the function library, so a Redis that lost its data gets
  the map back before the first entry written after it; ``forget()`` (a reader's failed read)
  drops the cached maps.

The writer is the turn's owner (it holds the lease); readers never write.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import orjson
from redis.exceptions import RedisError, ResponseError

from drupe.chunks.types import Chunk

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = [
    "DEFAULT_LOG_TTL",
    "DEFAULT_MAXLEN",
    "DEFAULT_TRIM_EVERY",
    "FencedOut",
    "LogEntry",
    "RedisChunkLog",
    "UnknownExecution",
    "anchors_key",
    "decode_entry",
    "encode_batch",
    "encode_end",
    "log_key",
    "run_part",
]

log = logging.getLogger(__name__)

DEFAULT_MAXLEN: Final = 100_000
"""Entries one turn's log keeps (approximate trimming); a batch is up to 25 ms of text."""

DEFAULT_TRIM_EVERY: Final = 64
"""Appends to a key between two ``MAXLEN`` trims."""

DEFAULT_LOG_TTL: Final = 300.0
"""Seconds a finished turn's log stays readable."""

_NAMES_TTL: Final = 24 * 3600
"""Seconds the execution numbers live at least once registered (a finished turn's end shortens
the hash's TTL to the log's, with the anchors)."""

_CACHE_BOUND: Final = 10_000


def log_key(prefix: str, conversation_id: str, turn_id: str) -> str:
    """The Redis key of one turn's chunk log."""
    return f"{prefix}:log:{conversation_id}:{turn_id}"


def anchors_key(log_key: str) -> str:
    """The turn's hash: execution id -> the row it fills (``anchor_message_id``), and the
    execution numbers of the log's entries (``#<n>`` -> execution id)."""
    return f"{log_key}:anchors"


class FencedOut(Exception):
    """The writer's lease is gone: the write was refused."""


class UnknownExecution(LookupError):
    """A compact entry names a number (an execution's or a part's) its map does not hold."""


_LIBRARY_NAME: Final = "drupe_log_1"
_APPEND: Final = "dl1"
_INTERN: Final = "dl1n"
_LIBRARY: Final = f"""#!lua name={_LIBRARY_NAME}
-- The chunk log's writes (src/drupe/cluster/chunk_log.py).

local function holds(key, fence)
  local held = redis.call('GET', key)
  if not held then return false end
  if string.byte(fence, 1) == 124 then -- '|<token>': the token part of '<node>|<token>'
    return #held > #fence and string.sub(held, -#fence) == fence
  end
  return held == fence
end

-- A fenced append. KEYS: log [, lease] (the lease when ARGV[1] is not '').
-- ARGV: fence or '', payload [, maxlen or '' [, ttl]]. Returns the entry id, or false.
redis.register_function('{_APPEND}', function(keys, args)
  if args[1] ~= '' and not holds(keys[2], args[1]) then return false end
  local id
  if args[3] and args[3] ~= '' then
    id = redis.call('XADD', keys[1], 'MAXLEN', '~', args[3], '*', 'p', args[2])
  else
    id = redis.call('XADD', keys[1], '*', 'p', args[2])
  end
  if args[4] then redis.call('EXPIRE', keys[1], args[4]) end
  return id
end)

-- The numbers of strings (execution ids, part ids) in a turn's hash, '#<n>' -> string: a
-- string keeps its number; a new one gets the wanted number if free, else the next free one.
-- KEYS: names. ARGV: string, wanted number [, string, wanted number ...]. Returns the numbers.
redis.register_function('{_INTERN}', function(keys, args)
  local all = redis.call('HGETALL', keys[1])
  local number_of, taken = {{}}, {{}}
  for i = 1, #all, 2 do
    if string.byte(all[i], 1) == 35 then
      local n = tonumber(string.sub(all[i], 2))
      taken[n] = true
      number_of[all[i + 1]] = n
    end
  end
  local out = {{}}
  for i = 1, #args, 2 do
    local n = number_of[args[i]]
    if not n then
      n = tonumber(args[i + 1])
      while taken[n] do n = n + 1 end
      taken[n] = true
      number_of[args[i]] = n
      redis.call('HSET', keys[1], '#' .. n, args[i])
    end
    out[#out + 1] = n
  end
  if redis.call('TTL', keys[1]) < {_NAMES_TTL} then redis.call('EXPIRE', keys[1], {_NAMES_TTL}) end
  return out
end)
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


# --- the compact encoding (pure) ---------------------------------------------------------------

_RUNS: Final[dict[str, tuple[bytes, str, str]]] = {
    "text-delta": (b"d", "id", "delta"),
    "reasoning-delta": (b"r", "id", "delta"),
    "tool-input-delta": (b"i", "toolCallId", "inputTextDelta"),
}
_RUN_OF_TAG: Final[dict[int, tuple[str, str, str]]] = {
    tag[0]: (kind, ident, text) for kind, (tag, ident, text) in _RUNS.items()
}


def run_part(chunks: list[Chunk], seqs: list[int] | None) -> str | None:
    """The part id of a batch written in the raw-text form (one merged delta with exactly the
    keys type, part id and text, in that order, and its seq); ``None`` for any other batch."""
    if len(chunks) != 1 or seqs is None or len(seqs) != 1:
        return None
    chunk = chunks[0]
    run = _RUNS.get(chunk.get("type", ""))
    if run is None:
        return None
    _, ident, text = run
    part = chunk.get(ident)
    if list(chunk) != ["type", ident, text] or not isinstance(chunk.get(text), str):
        return None
    return part if isinstance(part, str) else None


def encode_batch(
    number: int,
    chunks: list[Chunk],
    seqs: list[int] | None = None,
    parts: Mapping[str, int] | None = None,
) -> bytes:
    """The ``p`` value of one batch of execution ``number`` (see the module docstring);
    ``parts``: the numbers of part ids (the raw-text form needs its part's number)."""
    part = run_part(chunks, seqs)
    if part is not None and parts is not None and part in parts:
        chunk = chunks[0]
        tag, _, text = _RUNS[chunk["type"]]
        assert seqs is not None
        return tag + f"{number},{seqs[0]},{parts[part]}:".encode() + str(chunk[text]).encode()
    numbers = ",".join([str(number), *(str(seq) for seq in seqs or ())])
    return b"j" + numbers.encode() + b":" + orjson.dumps(chunks)


def encode_end(
    number: int,
    status: str,
    *,
    done: bool = True,
    error: dict[str, Any] | None = None,
    reason: str | None = None,
    retried_as: tuple[str, str] | None = None,
) -> bytes:
    """The ``p`` value of an execution's terminal entry."""
    fields: dict[str, Any] = {"t": status, "d": 1 if done else 0}
    if error is not None:
        fields["x"] = error
    if reason is not None:
        fields["r"] = reason
    if retried_as is not None:
        fields["n"] = "/".join(retried_as)
    return b"e" + str(number).encode() + b":" + orjson.dumps(fields)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _name(number: int, names: Mapping[int, str] | None, *, zero: bool = True) -> str:
    if number == 0 and zero:
        return ""
    name = None if names is None else names.get(number)
    if name is None:
        raise UnknownExecution(number)
    return name


def decode_entry(
    entry_id: Any, fields: dict[Any, Any], names: Mapping[int, str] | None = None
) -> LogEntry:
    """One raw stream entry (as ``XRANGE``/``XREAD`` return it) as a ``LogEntry``.

    ``names``: the turn's execution numbers (``#<n>`` of ``<log key>:anchors``); a compact entry
    whose number is not there raises ``UnknownExecution`` (``RedisChunkLog.decode`` reads the
    map again then)."""
    named = {_text(k): v for k, v in fields.items()}
    cursor = _text(entry_id)
    payload = named.get("p")
    if payload is not None:
        return _decode_compact(
            cursor, payload if isinstance(payload, bytes) else payload.encode(), names
        )
    terminal = named.get("t")
    retried_as: tuple[str, str] | None = None
    if "n" in named:
        turn, _, execution = _text(named["n"]).partition("/")
        retried_as = (turn, execution)
    return LogEntry(
        cursor=cursor,
        execution_id=_text(named.get("e", b"")),
        chunks=tuple(orjson.loads(named["c"])) if "c" in named else (),
        terminal=None if terminal is None else _text(terminal),
        seqs=tuple(orjson.loads(named["s"])) if "s" in named else (),
        done=_text(named.get("d", b"0")) == "1",
        error=orjson.loads(named["x"]) if "x" in named else None,
        reason=_text(named["r"]) if "r" in named else None,
        retried_as=retried_as,
    )


def _decode_compact(cursor: str, payload: bytes, names: Mapping[int, str] | None) -> LogEntry:
    tag = payload[0]
    head, _, body = payload[1:].partition(b":")
    run = _RUN_OF_TAG.get(tag)
    if run is not None:
        kind, ident, text = run
        number, seq, part = head.split(b",")
        chunk: Chunk = {
            "type": kind,
            ident: _name(int(part), names, zero=False),
            text: body.decode(),
        }
        return LogEntry(cursor, _name(int(number), names), (chunk,), seqs=(int(seq),))
    if tag == ord("j"):
        number, *seqs = head.split(b",")
        return LogEntry(
            cursor,
            _name(int(number), names),
            tuple(orjson.loads(body)),
            seqs=tuple(int(seq) for seq in seqs),
        )
    if tag == ord("e"):
        fields = orjson.loads(body)
        retried_as = None
        if "n" in fields:
            turn, _, execution = str(fields["n"]).partition("/")
            retried_as = (turn, execution)
        return LogEntry(
            cursor,
            _name(int(head), names),
            terminal=str(fields["t"]),
            done=fields.get("d") == 1,
            error=fields.get("x"),
            reason=fields.get("r"),
            retried_as=retried_as,
        )
    raise ValueError(f"not a chunk log entry: {payload[:16]!r}")


def _names_of(raw: Mapping[Any, Any]) -> dict[int, str]:
    """The ``#<n>`` fields of a turn's anchors hash as number -> execution id."""
    out: dict[int, str] = {}
    for field_, value in raw.items():
        name = _text(field_)
        if name.startswith("#") and name[1:].isdigit():
            out[int(name[1:])] = _text(value)
    return out


# --- the Redis side ------------------------------------------------------------------------


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
        part = run_part(chunks, seqs)

        def payload(numbers: Mapping[str, int]) -> bytes:
            parts = None if part is None else numbers
            return encode_batch(numbers.get(execution_id, 0), chunks, seqs, parts)

        strings = [s for s in (execution_id, part) if s]
        return await self._write(key, strings, payload, fence=fence, expire=False)

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
                return await self._append(key, payload(numbers), fence, expire)
            except ResponseError as err:
                if attempt == 2 or "function not found" not in str(err).lower():
                    self._unconfirm(key)
                    raise
                # Redis lost its functions (a restart without its data): load them again, and
                # register every string again before its next use.
                await self._redis.function_load(_LIBRARY, replace=True)
                self._unconfirm(None)
            except (FencedOut, OSError, RedisError):
                self._unconfirm(key)
                raise
        raise AssertionError("unreachable")

    async def _intern(self, key: str, strings: list[str]) -> dict[str, int]:
        """The numbers of ``strings`` in the turn's hash, registering those not confirmed."""
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
        got: Any = await self._redis.fcall(_INTERN, 1, anchors_key(key), *args)
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
        keys = [key]
        args: list[Any] = ["", payload]
        if fence is not None:
            lease_key, value = fence
            if not value:
                raise ValueError("a fence needs a lease value")
            keys.append(lease_key)
            args[0] = value[value.rfind("|") :] if "|" in value else value
        count = self._appends.get(key, 0)
        if len(self._appends) > _CACHE_BOUND:
            self._appends.clear()
        self._appends[key] = count + 1
        trim = self.maxlen if count % self.trim_every == 0 else ""
        if expire:
            args += [trim, max(1, round(self.ttl))]
        elif trim != "":
            args.append(trim)
        result: Any = await self._redis.fcall(_APPEND, len(keys), *keys, *args)
        if result is None:
            raise FencedOut(f"the lease {keys[1]!r} is no longer {fence and fence[1]!r}")
        return _text(result)

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
            names = self._remember(key, _names_of(raw or {}))
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
