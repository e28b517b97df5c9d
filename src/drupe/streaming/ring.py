"""Pure replay ring of one execution (reference §2.5, scenarios 9-11).

The ring keeps the chunks a late subscriber needs, in order, each tagged with the stream
sequence number it was fanned out with. Rules:

* contiguous deltas of one part (same type and ``id``/``toolCallId``) merge into one entry, up to
  ``max_delta_bytes`` UTF-8 bytes; so the cap counts parts, not raw deltas, and a delta flood can
  never evict the part's opening chunk;
* a delta larger than ``max_delta_bytes`` is split into entries that each hold the longest rest of
  it that fits (cut at a character boundary; ``max_delta_bytes`` must be at least 4); they share
  the delta's sequence number and never absorb a later delta;
* a delta with ``providerMetadata`` is kept as it is, never merged nor split (the metadata
  belongs to that delta);
* when the ring is full the oldest entry is dropped (``dropped`` counts them), but never while an
  approval is pending: then the ring grows until the approval resolves;
* a merged entry remembers the sequence number and text offset of every delta it absorbed, so a
  subscriber resuming after any cursor gets exactly the text it has not seen.

Entries are never shared with callers: ``entries_after`` builds new chunk dicts.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from drupe.chunks.types import Chunk

__all__ = ["ReplayRing", "RingEntry"]

_DELTA_FIELD = {
    "text-delta": "delta",
    "reasoning-delta": "delta",
    "tool-input-delta": "inputTextDelta",
}
_PART_KEY = {"text-delta": "id", "reasoning-delta": "id", "tool-input-delta": "toolCallId"}


@dataclass(slots=True)
class RingEntry:
    """One buffered chunk, or a run of merged deltas of one part."""

    seq: int
    """Sequence number of the last chunk this entry covers."""
    chunk: Chunk
    first_seq: int
    text: list[str] | None = None
    """For merged deltas: the pieces (joined lazily)."""
    nbytes: int = 0
    seqs: array[int] | None = None
    """For merged deltas: the seq of each absorbed delta after the first."""
    offsets: array[int] | None = None
    """For merged deltas: the character offset where each absorbed delta starts."""
    nchars: int = 0

    def materialize(self) -> Chunk:
        """Return the chunk this entry stands for (a new dict for merged deltas)."""
        if self.text is None or len(self.text) == 1:
            return self.chunk
        out = dict(self.chunk)
        out[_DELTA_FIELD[self.chunk["type"]]] = "".join(self.text)
        return out

    def suffix_after(self, cursor: int) -> Chunk | None:
        """The part of this entry a subscriber that saw up to ``cursor`` still needs."""
        if cursor < self.first_seq:
            return self.materialize()
        if self.seqs is None:
            return None  # one delta (or another chunk) at first_seq: seen entirely
        assert self.offsets is not None  # set with ``seqs``
        assert self.text is not None
        for i, s in enumerate(self.seqs):
            if s > cursor:
                out = dict(self.chunk)
                out[_DELTA_FIELD[self.chunk["type"]]] = "".join(self.text)[self.offsets[i] :]
                return out
        return None  # every absorbed delta is at or before the cursor


@dataclass(slots=True)
class ReplayRing:
    """Bounded ring of ``RingEntry`` with delta merging and approval pinning."""

    max_entries: int = 10_000
    max_delta_bytes: int = 16_384
    entries: deque[RingEntry] = field(default_factory=deque)
    dropped: int = 0
    evicted_seq: int = 0
    """Sequence number of the newest evicted entry (0: nothing evicted)."""
    pinned: bool = False
    """True while an approval is pending: nothing is evicted."""

    def __len__(self) -> int:
        return len(self.entries)

    def append(self, seq: int, chunk: Chunk) -> None:
        """Buffer ``chunk`` fanned out with sequence number ``seq``."""
        ctype = chunk["type"]
        dfield = _DELTA_FIELD.get(ctype)
        if dfield is not None and not chunk.get("providerMetadata"):
            piece: str = chunk[dfield]
            size = len(piece.encode()) if not piece.isascii() else len(piece)
            if self.entries:
                tail = self.entries[-1]
                tchunk = tail.chunk
                key = _PART_KEY[ctype]
                if (
                    tail.text is not None
                    and tchunk["type"] == ctype
                    and tchunk[key] == chunk[key]
                    and tail.nbytes + size <= self.max_delta_bytes
                ):
                    if tail.seqs is None:
                        tail.seqs = array("q")
                        tail.offsets = array("q")
                    tail.seqs.append(seq)
                    assert tail.offsets is not None
                    tail.offsets.append(tail.nchars)
                    tail.text.append(piece)
                    tail.nbytes += size
                    tail.nchars += len(piece)
                    tail.seq = seq
                    return
            if size > self.max_delta_bytes:
                self._append_split(seq, chunk, dfield, piece)
                return
            self._push(
                RingEntry(
                    seq=seq,
                    first_seq=seq,
                    chunk=chunk,
                    text=[piece],
                    nbytes=size,
                    nchars=len(piece),
                )
            )
            return
        self._push(RingEntry(seq=seq, first_seq=seq, chunk=chunk))

    def _append_split(self, seq: int, chunk: Chunk, dfield: str, piece: str) -> None:
        # An oversized delta is split into entries of at most max_delta_bytes each: every entry
        # holds the longest rest of the delta that fits, cut at a character boundary. Every
        # entry carries the same seq; none absorbs a later delta (``text`` stays None).
        data = piece.encode()
        start = 0
        while start < len(data):
            end = start + self.max_delta_bytes
            while end < len(data) and data[end] & 0xC0 == 0x80:
                end -= 1  # a UTF-8 continuation byte: cut before its character
            out: dict[str, Any] = dict(chunk)
            out[dfield] = data[start:end].decode()
            self._push(RingEntry(seq=seq, first_seq=seq, chunk=out))
            start = end

    def _push(self, entry: RingEntry) -> None:
        self.entries.append(entry)
        if not self.pinned:
            while len(self.entries) > self.max_entries:
                self._evict()

    def _evict(self) -> None:
        self.evicted_seq = self.entries.popleft().seq
        self.dropped += 1

    def unpin(self) -> None:
        """Approvals resolved: evict down to capacity again."""
        self.pinned = False
        while len(self.entries) > self.max_entries:
            self._evict()

    def chunks(self) -> list[Chunk]:
        """Every buffered chunk, merged runs materialized."""
        return [e.materialize() for e in self.entries]

    def entries_after(self, cursor: int) -> Iterator[tuple[int, Chunk]]:
        """``(seq, chunk)`` for everything after ``cursor``; exact inside merged runs."""
        for e in self.entries:
            if e.seq <= cursor:
                continue
            out = e.suffix_after(cursor)
            if out is not None:
                yield e.seq, out

    def covers(self, cursor: int) -> bool:
        """Whether resuming after ``cursor`` loses nothing (nothing after it was evicted)."""
        return cursor >= self.evicted_seq
