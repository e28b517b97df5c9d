"""The chunk log's entries: ``LogEntry`` and the compact encoding of the ``p`` field (pure).

Owns: ``encode_batch`` / ``encode_end`` (what a writer puts in an entry), ``decode_entry`` (an
entry as ``XRANGE``/``XREAD`` return it, back to a ``LogEntry``), ``run_part`` and ``names_of``.
No I/O: ``drupe.cluster.chunk_log`` does the Redis side. The format (``docs/lifecycles/cluster.md``,
"The chunk log"):

* An entry holds one batch of one execution's chunks, as the ``Coalescer`` produced it, or one
  execution's end, in ONE field ``p``:

  - ``d<n>,<seq>,<k>:<text>``: a batch that is one merged text delta (``r``: reasoning, ``i``:
    tool input) with exactly the keys type, part id and text: its seq, its part id's number
    ``<k>``, and the raw text after the first ``:``, no JSON;
  - ``j<n>[,<seq>...]:<JSON array>``: any other batch, with the owner's seq of each chunk;
  - ``e<n>:<JSON object>``: an execution's end (``t``: status, ``d``: ``1`` when the
    conversation is done, optionally ``x``: the error, ``r``: the reason of a pause, ``n``:
    ``<turn>/<execution>``, the execution that answers again in its place, written by a
    takeover with ``on_owner_loss = "retry"``).

  ``<n>`` is the execution's number in the turn (``0``: the turn-wide terminal, execution id
  ``""``), ``<k>`` a part id's: one numbering for both, the ``#<n>`` fields of the turn's hash
  ``<log key>:anchors`` (``drupe.cluster.chunk_log`` registers them; decoding takes the map).
  ``decode_entry`` also reads the plain field form (``e``, ``c``, ``s``, ``t``, ``d``, ``x``,
  ``r``) that the turn lists use. The entry's stream id (``<ms>-<n>``) orders the log; the seqs
  are the cursors clients see (``<turn>/<seq>``), the same on every node.

``msgpack_array`` encodes the arguments of the writer's batched call (``dl3m``,
``drupe.cluster.log_functions``) and its registry's values.

A feed entry (field ``f``, written by the chunk log's functions, ``drupe.cluster.log_functions``)
packs the entries one call wrote, each as three ``<length>:<bytes>`` strings: the log key, the
entry id, the ``p`` payload; ``feed_items`` splits it.

Must never: lose or reorder a chunk, its seq or a terminal's fields in a round trip; an unknown
number raises ``UnknownExecution`` (never decodes as some other string).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from drupe.chunks.types import Chunk

__all__ = [
    "LogEntry",
    "UnknownExecution",
    "as_text",
    "decode_entry",
    "encode_batch",
    "encode_end",
    "feed_items",
    "msgpack_array",
    "names_of",
    "run_part",
]


class UnknownExecution(LookupError):
    """A compact entry names a number (an execution's or a part's) its map does not hold."""


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


def as_text(value: Any) -> str:
    """A Redis reply (bytes or str) as a str."""
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
    whose number is not there raises ``UnknownExecution`` (``RedisChunkLog.decode`` reads
    the map again then)."""
    named = {as_text(k): v for k, v in fields.items()}
    cursor = as_text(entry_id)
    payload = named.get("p")
    if payload is not None:
        return _decode_compact(
            cursor, payload if isinstance(payload, bytes) else payload.encode(), names
        )
    terminal = named.get("t")
    retried_as: tuple[str, str] | None = None
    if "n" in named:
        turn, _, execution = as_text(named["n"]).partition("/")
        retried_as = (turn, execution)
    return LogEntry(
        cursor=cursor,
        execution_id=as_text(named.get("e", b"")),
        chunks=tuple(orjson.loads(named["c"])) if "c" in named else (),
        terminal=None if terminal is None else as_text(terminal),
        seqs=tuple(orjson.loads(named["s"])) if "s" in named else (),
        done=as_text(named.get("d", b"0")) == "1",
        error=orjson.loads(named["x"]) if "x" in named else None,
        reason=as_text(named["r"]) if "r" in named else None,
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


def names_of(raw: Mapping[Any, Any]) -> dict[int, str]:
    """The ``#<n>`` fields of a turn's anchors hash as number -> execution id."""
    out: dict[int, str] = {}
    for field_, value in raw.items():
        name = as_text(field_)
        if name.startswith("#") and name[1:].isdigit():
            out[int(name[1:])] = as_text(value)
    return out


def feed_items(packed: bytes) -> list[tuple[str, str, bytes]]:
    """A feed entry's ``(log key, entry id, payload)`` items, in the order they were written.

    Raises ``ValueError`` on a malformed entry (a length that is not a number or runs past
    the end)."""
    out: list[tuple[str, str, bytes]] = []
    at, end = 0, len(packed)
    parts: list[bytes] = []
    while at < end:
        colon = packed.index(b":", at)
        length = int(packed[at:colon])
        stop = colon + 1 + length
        if length < 0 or stop > end:
            raise ValueError(f"a feed entry's length runs past its end at byte {at}")
        parts.append(packed[colon + 1 : stop])
        at = stop
        if len(parts) == 3:
            out.append((parts[0].decode(), parts[1].decode(), parts[2]))
            parts = []
    if parts:
        raise ValueError("a feed entry ends inside an item")
    return out


def msgpack_array(items: list[int | bytes]) -> bytes:
    """``items`` as ONE MessagePack array, the subset the chunk log's function decodes with
    Redis's ``cmsgpack``: non-negative integers (< 2**64) and byte strings (as ``str``, which
    ``cmsgpack`` returns as Lua strings whatever the bytes; it rejects ``bin``)."""
    out = bytearray(_header(len(items), 0x90, 16, 0xDC))
    for value in items:
        if isinstance(value, int):
            if value < 0:
                raise ValueError(f"a negative integer has no place here: {value}")
            if value < 0x80:
                out.append(value)
            elif value < 0x100:
                out += bytes((0xCC, value))
            elif value < 0x10000:
                out += b"\xcd" + value.to_bytes(2, "big")
            elif value < 0x100000000:
                out += b"\xce" + value.to_bytes(4, "big")
            else:
                out += b"\xcf" + value.to_bytes(8, "big")
        else:
            size = len(value)
            if size < 32:
                out.append(0xA0 | size)
            elif size < 0x100:
                out += bytes((0xD9, size))
            else:
                out += _header(size, 0, 0, 0xDA)
            out += value
    return bytes(out)


def _header(size: int, fix: int, fix_limit: int, sixteen: int) -> bytes:
    """A MessagePack length: ``fix | size`` below ``fix_limit``, else the 16- or the 32-bit
    form (``sixteen`` and the code after it)."""
    if size < fix_limit:
        return bytes((fix | size,))
    if size < 0x10000:
        return bytes((sixteen,)) + size.to_bytes(2, "big")
    return bytes((sixteen + 1,)) + size.to_bytes(4, "big")
