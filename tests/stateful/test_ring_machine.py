"""Hypothesis state machine over the pure replay ring (reference §2.5, scenarios 9-11).

The model keeps every chunk ever appended; invariants check merging, eviction, approval
pinning, and that resuming after any cursor yields exactly the unseen text.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from drupe.streaming.ring import ReplayRing

PARTS = ["t1", "t2"]


def _text_by_part(chunks: list[tuple[int, dict[str, Any]]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for _, c in chunks:
        if c["type"] == "text-delta":
            out[c["id"]] = out.get(c["id"], "") + c["delta"]
    return out


class RingMachine(RuleBasedStateMachine):
    @initialize(cap=st.integers(1, 6), max_bytes=st.integers(16, 64))
    def start(self, cap: int, max_bytes: int) -> None:
        self.ring = ReplayRing(max_entries=cap, max_delta_bytes=max_bytes)
        self.log: list[tuple[int, dict[str, Any]]] = []
        self.seq = 0
        self.pinned = False
        """The model's pin: set while an approval is pending, cleared by ``unpin``."""

    def _push(self, chunk: dict[str, Any]) -> None:
        self.seq += 1
        self.ring.append(self.seq, chunk)
        self.log.append((self.seq, chunk))

    @rule(part=st.sampled_from(PARTS), text=st.text(min_size=1, max_size=40))
    def delta(self, part: str, text: str) -> None:
        self._push({"type": "text-delta", "id": part, "delta": text})

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

    @invariant()
    def bounded_unless_pinned(self) -> None:
        assert self.ring.pinned is self.pinned
        if not self.pinned:
            assert len(self.ring) <= self.ring.max_entries

    @invariant()
    def merged_entries_respect_byte_cap(self) -> None:
        for entry in self.ring.entries:
            if entry.text is not None and len(entry.text) > 1:
                assert entry.nbytes <= self.ring.max_delta_bytes

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
            expected = [(s, c) for s, c in self.log if s > cursor]
            assert _text_by_part(replayed) == _text_by_part(expected)
            others = [c for _, c in replayed if c["type"] != "text-delta"]
            assert others == [c for _, c in expected if c["type"] != "text-delta"]

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
