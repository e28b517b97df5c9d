"""Hypothesis state machine over the pure replay ring (reference §2.5, scenarios 9-11).

Two models sit beside the ring:

* the log of every chunk ever appended: resuming after any covered cursor yields exactly the
  unseen text of every part and every other chunk, in order;
* the entry layout the module docstring states, rebuilt step by step in plain lists: contiguous
  deltas of one part (type and ``id``/``toolCallId``) share one entry while it stays within
  ``max_delta_bytes`` UTF-8 bytes; an oversized delta becomes entries of the longest prefix that
  fits, character by character, which absorb nothing; a delta with ``providerMetadata`` or any
  other chunk is an entry of its own; unpinned, the oldest entries beyond ``max_entries`` are
  dropped and counted; pinned, nothing is. The ring must hold exactly these entries (their
  chunks and sequence numbers), its ``dropped`` count and its newest evicted sequence number.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from drupe.streaming.ring import ReplayRing

PARTS = ["t1", "t2"]
# The delta chunk types, the field holding the text and the field naming the part.
DELTAS = {
    "text-delta": ("delta", "id"),
    "reasoning-delta": ("delta", "id"),
    "tool-input-delta": ("inputTextDelta", "toolCallId"),
}


def _delta(kind: str, part: str, text: str, meta: bool = False) -> dict[str, Any]:
    field, key = DELTAS[kind]
    chunk: dict[str, Any] = {"type": kind, key: part, field: text}
    if meta:
        chunk["providerMetadata"] = {"p": {"n": len(text)}}
    return chunk


def _is_plain_delta(chunk: dict[str, Any]) -> bool:
    return chunk["type"] in DELTAS and not chunk.get("providerMetadata")


def _text_by_part(chunks: list[tuple[int, dict[str, Any]]]) -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    for _, c in chunks:
        if c["type"] in DELTAS:
            field, key = DELTAS[c["type"]]
            part = (c["type"], c[key])
            out[part] = out.get(part, "") + c[field]
    return out


def _others(chunks: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The chunks replayed as they were: everything but the deltas that may merge."""
    return [c for _, c in chunks if not _is_plain_delta(c)]


def _longest_prefixes(text: str, max_bytes: int) -> list[str]:
    """``text`` cut, character by character, into the longest pieces of at most max_bytes."""
    pieces = [""]
    for ch in text:
        if len((pieces[-1] + ch).encode()) > max_bytes:
            pieces.append(ch)
        else:
            pieces[-1] += ch
    return pieces


@dataclass
class ModelEntry:
    seq: int
    first_seq: int
    chunk: dict[str, Any]
    text: str | None = None
    """The merged text while the entry may still absorb deltas of its part; None otherwise."""
    part: tuple[str, str] | None = None
    """The delta type and part id of an entry that may absorb deltas."""

    def expected_chunk(self) -> dict[str, Any]:
        if self.text is None:
            return self.chunk
        return {**self.chunk, DELTAS[self.chunk["type"]][0]: self.text}


class RingMachine(RuleBasedStateMachine):
    @initialize(cap=st.integers(1, 6), max_bytes=st.integers(16, 64))
    def start(self, cap: int, max_bytes: int) -> None:
        self.ring = ReplayRing(max_entries=cap, max_delta_bytes=max_bytes)
        self.log: list[tuple[int, dict[str, Any]]] = []
        self.seq = 0
        self.pinned = False
        """The model's pin: set while an approval is pending, cleared by ``unpin``."""
        self.entries: list[ModelEntry] = []
        self.dropped = 0
        self.evicted_seq = 0

    # -- the layout model --------------------------------------------------------------------

    def _model_evict(self) -> None:
        if self.pinned:
            return
        while len(self.entries) > self.ring.max_entries:
            self.evicted_seq = self.entries.pop(0).seq
            self.dropped += 1

    def _model_append(self, seq: int, chunk: dict[str, Any]) -> None:
        max_bytes = self.ring.max_delta_bytes
        if not _is_plain_delta(chunk):
            self.entries.append(ModelEntry(seq, seq, chunk))
            self._model_evict()
            return
        field, key = DELTAS[chunk["type"]]
        text: str = chunk[field]
        size = len(text.encode())
        part = (chunk["type"], chunk[key])
        if size <= self._tail_room(*part):
            tail = self.entries[-1]
            assert tail.text is not None
            tail.text += text
            tail.seq = seq
        elif size <= max_bytes:
            self.entries.append(ModelEntry(seq, seq, chunk, text=text, part=part))
        else:
            for piece in _longest_prefixes(text, max_bytes):
                self.entries.append(ModelEntry(seq, seq, {**chunk, field: piece}))
        self._model_evict()

    def _tail_room(self, kind: str, part: str) -> int:
        """Bytes the tail entry can still absorb from a delta of this part (-1: none)."""
        tail = self.entries[-1] if self.entries else None
        if tail is None or tail.text is None or tail.part != (kind, part):
            return -1
        return self.ring.max_delta_bytes - len(tail.text.encode())

    # -- rules -------------------------------------------------------------------------------

    def _push(self, chunk: dict[str, Any]) -> None:
        self.seq += 1
        self.ring.append(self.seq, chunk)
        self.log.append((self.seq, chunk))
        self._model_append(self.seq, chunk)

    @rule(
        kind=st.sampled_from(sorted(DELTAS)),
        part=st.sampled_from(PARTS),
        text=st.text(max_size=40),
        meta=st.sampled_from([False, False, False, True]),
    )
    def delta(self, kind: str, part: str, text: str, meta: bool) -> None:
        self._push(_delta(kind, part, text, meta))

    @rule(
        kind=st.sampled_from(sorted(DELTAS)),
        part=st.sampled_from(PARTS),
        extra=st.sampled_from([-1, 0, 1]),
        fill=st.sampled_from(["a", "é"]),
    )
    def to_the_byte_cap(self, kind: str, part: str, extra: int, fill: str) -> None:
        """A delta that fills the tail (or a fresh entry) to the byte cap, one byte more or less."""
        room = self._tail_room(kind, part)
        if room < 0:  # a fresh entry
            room = self.ring.max_delta_bytes
        want = max(0, room + extra)
        text = fill * (want // len(fill.encode())) + "a" * (want % len(fill.encode()))
        self._push(_delta(kind, part, text))

    @rule(n=st.integers(0, 99))
    def other(self, n: int) -> None:
        self._push({"type": "data-x", "id": f"x{n}", "data": n})

    @rule()
    def pin(self) -> None:
        self.ring.pinned = True
        self.pinned = True

    @rule()
    def unpin(self) -> None:
        self.ring.unpin()
        self.pinned = False
        self._model_evict()

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def entries_match_the_layout_model(self) -> None:
        assert self.ring.pinned is self.pinned
        assert len(self.ring) == len(self.entries)
        assert self.ring.chunks() == [e.expected_chunk() for e in self.entries]
        assert [(e.first_seq, e.seq) for e in self.ring.entries] == [
            (e.first_seq, e.seq) for e in self.entries
        ]
        assert self.ring.dropped == self.dropped
        assert self.ring.evicted_seq == self.evicted_seq

    @invariant()
    def bounded_unless_pinned(self) -> None:
        if not self.pinned:
            assert len(self.ring) <= self.ring.max_entries

    @invariant()
    def every_delta_entry_within_the_byte_cap(self) -> None:
        for chunk in self.ring.chunks():
            if chunk["type"] in DELTAS and not chunk.get("providerMetadata"):
                text = chunk[DELTAS[chunk["type"]][0]]
                assert len(text.encode()) <= self.ring.max_delta_bytes

    @invariant()
    def entries_are_in_order(self) -> None:
        seqs = [e.seq for e in self.ring.entries]
        assert seqs == sorted(seqs)
        if self.ring.entries:
            # Split pieces of one oversized delta share a seq, so eviction may stop inside one.
            assert self.ring.evicted_seq <= self.ring.entries[0].first_seq

    @invariant()
    def resume_after_any_covered_cursor_is_exact(self) -> None:
        span = range(self.ring.evicted_seq, self.seq + 1)
        step = max(1, len(span) // 6)
        for cursor in [*span[::step], self.seq]:
            assert self.ring.covers(cursor)
            replayed = list(self.ring.entries_after(cursor))
            assert all(s > cursor for s, _ in replayed)
            expected = [(s, c) for s, c in self.log if s > cursor]
            assert _text_by_part(replayed) == _text_by_part(expected)
            assert _others(replayed) == _others(expected)
        if self.ring.evicted_seq > 0:
            assert not self.ring.covers(self.ring.evicted_seq - 1)

    @invariant()
    def nothing_lost_without_eviction(self) -> None:
        if self.ring.dropped == 0:
            assert _text_by_part(list(self.ring.entries_after(0))) == _text_by_part(self.log)


TestRingMachine = RingMachine.TestCase
TestRingMachine.settings = settings(
    max_examples=int(os.environ.get("DRUPE_MACHINE_EXAMPLES", "80")),
    stateful_step_count=30,
    deadline=None,
)
