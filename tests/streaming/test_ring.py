"""The replay ring's rules case by case (reference §2.5; the contract in ``streaming/ring.py``).

Expected values are written out by hand: where an oversized delta is cut (the longest rest
that fits in ``max_delta_bytes`` UTF-8 bytes, at a character boundary), when a delta joins the
tail entry (same type and part, byte cap included), how many entries the ring keeps and how many
it counts as dropped, pinned or not. Millisecond tests: the mutation run uses them beside the
ring machine (``tests/stateful/test_ring_machine.py``).
"""

from __future__ import annotations

from typing import Any

import pytest

from drupe.streaming.ring import ReplayRing


def _text(part: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text-delta", "id": part, "delta": text, **extra}


def _data(n: int) -> dict[str, Any]:
    return {"type": "data-x", "id": f"x{n}", "data": n}


def _texts(ring: ReplayRing) -> list[str]:
    """The text of every text-delta entry, in order."""
    return [c["delta"] for c in ring.chunks() if c["type"] == "text-delta"]


# -- splitting an oversized delta (max_delta_bytes = 16) ------------------------------------
# UTF-8 widths: é, ñ, ü 2 bytes; € 3 bytes; 😀 4 bytes. The continuation bytes differ in
# their low bits (é C3 A9, ñ C3 B1, ü C3 BC, € E2 82 AC, 😀 F0 9F 98 80).


@pytest.mark.parametrize(
    ("delta", "pieces"),
    [
        ("a" * 17, ["a" * 16, "a"]),
        ("a" * 32, ["a" * 16, "a" * 16]),
        ("a" * 40, ["a" * 16, "a" * 16, "a" * 8]),
        ("a" * 15 + "é", ["a" * 15, "é"]),
        ("a" * 14 + "éb", ["a" * 14 + "é", "b"]),
        ("a" * 15 + "ñ" + "b" * 16, ["a" * 15, "ñ" + "b" * 14, "bb"]),
        ("ü" * 9, ["ü" * 8, "ü"]),
        ("€" * 6, ["€" * 5, "€"]),
        ("ab" + "€" * 5, ["ab" + "€" * 4, "€"]),
        ("a" + "€" * 6, ["a" + "€" * 5, "€"]),
        ("😀" * 5, ["😀" * 4, "😀"]),
        ("a" + "😀" * 4, ["a" + "😀" * 3, "😀"]),
        ("aa" + "😀" * 4, ["aa" + "😀" * 3, "😀"]),
        ("aaa" + "😀" * 4, ["aaa" + "😀" * 3, "😀"]),
        ("a" * 10 + "😀" * 2 + "€" * 6, ["a" * 10 + "😀", "😀" + "€" * 4, "€€"]),
    ],
)
def test_an_oversized_delta_is_cut_into_the_longest_pieces_that_fit(
    delta: str, pieces: list[str]
) -> None:
    ring = ReplayRing(max_entries=10, max_delta_bytes=16)
    ring.append(1, _data(0))
    ring.append(2, _text("t", delta))
    assert _texts(ring) == pieces
    assert [e.seq for e in ring.entries] == [1] + [2] * len(pieces)
    # Every piece replays after a cursor before the delta, none after it.
    assert [c["delta"] for _, c in ring.entries_after(1)] == pieces
    assert list(ring.entries_after(2)) == []
    # A split piece absorbs nothing, not even a delta that would fit.
    ring.append(3, _text("t", ""))
    ring.append(4, _text("t", "z"))
    assert _texts(ring) == [*pieces, "z"]


def test_a_split_keeps_the_other_fields_of_the_delta() -> None:
    ring = ReplayRing(max_entries=10, max_delta_bytes=16)
    ring.append(1, {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "x" * 20})
    assert ring.chunks() == [
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "x" * 16},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "xxxx"},
    ]


# -- merging into the tail entry (max_delta_bytes = 16) -------------------------------------


@pytest.mark.parametrize(
    ("deltas", "entries"),
    [
        # Up to the byte cap exactly, then an empty delta still fits, one more byte does not.
        (["a" * 10, "a" * 6], ["a" * 16]),
        (["a" * 10, "a" * 6, ""], ["a" * 16]),
        (["a" * 10, "a" * 6, "", "b"], ["a" * 16, "b"]),
        (["a" * 10, "a" * 7], ["a" * 10, "a" * 7]),
        # A delta of exactly the cap is one entry that an empty delta still joins.
        (["a" * 16], ["a" * 16]),
        (["a" * 16, ""], ["a" * 16]),
        (["a" * 16, "", "b"], ["a" * 16, "b"]),
        # The cap counts UTF-8 bytes, not characters: é is 2 bytes, € 3.
        (["é" * 5, "é" * 3], ["é" * 8]),
        (["é" * 5, "é" * 4], ["é" * 5, "é" * 4]),
        (["€" * 5, "a"], ["€" * 5 + "a"]),
        (["€" * 5, "é"], ["€" * 5, "é"]),
        (["a" * 15, "é"], ["a" * 15, "é"]),
        (["a" * 14, "é"], ["a" * 14 + "é"]),
        # Many small deltas of one part: one entry per 16 bytes.
        (["abcd"] * 9, ["abcd" * 4, "abcd" * 4, "abcd"]),
    ],
)
def test_contiguous_deltas_of_one_part_share_an_entry_up_to_the_byte_cap(
    deltas: list[str], entries: list[str]
) -> None:
    ring = ReplayRing(max_entries=100, max_delta_bytes=16)
    for seq, delta in enumerate(deltas, start=1):
        ring.append(seq, _text("t", delta))
    assert _texts(ring) == entries
    assert ring.dropped == 0


@pytest.mark.parametrize(
    ("first", "second", "merged"),
    [
        (_text("t1", "a"), _text("t1", "b"), True),
        (_text("t1", "a"), _text("t2", "b"), False),
        (
            {"type": "reasoning-delta", "id": "r", "delta": "a"},
            {"type": "reasoning-delta", "id": "r", "delta": "b"},
            True,
        ),
        # Same id, other type: another part.
        (_text("p", "a"), {"type": "reasoning-delta", "id": "p", "delta": "b"}, False),
        (
            {"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": "a"},
            {"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": "b"},
            True,
        ),
        (
            {"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": "a"},
            {"type": "tool-input-delta", "toolCallId": "d", "inputTextDelta": "b"},
            False,
        ),
        # A chunk between two deltas of one part ends the first entry.
        ({"type": "text-start", "id": "t1"}, _text("t1", "b"), False),
        # A delta with provider metadata keeps it: it neither joins nor is joined.
        (_text("t1", "a"), _text("t1", "b", providerMetadata={"p": {"k": 1}}), False),
        (_text("t1", "a", providerMetadata={"p": {"k": 1}}), _text("t1", "b"), False),
    ],
)
def test_which_deltas_join_the_tail_entry(
    first: dict[str, Any], second: dict[str, Any], merged: bool
) -> None:
    ring = ReplayRing(max_entries=10, max_delta_bytes=16)
    ring.append(1, first)
    ring.append(2, second)
    if merged:
        field = "inputTextDelta" if first["type"] == "tool-input-delta" else "delta"
        assert ring.chunks() == [{**first, field: "ab"}]
        assert [(e.first_seq, e.seq) for e in ring.entries] == [(1, 2)]
    else:
        assert ring.chunks() == [first, second]
        assert [(e.first_seq, e.seq) for e in ring.entries] == [(1, 1), (2, 2)]


def test_an_oversized_delta_with_provider_metadata_is_kept_whole() -> None:
    ring = ReplayRing(max_entries=10, max_delta_bytes=16)
    chunk = _text("t", "a" * 40, providerMetadata={"p": {"k": 1}})
    ring.append(1, chunk)
    assert ring.chunks() == [chunk]


def test_resuming_inside_a_merged_entry_gives_the_unseen_text() -> None:
    ring = ReplayRing(max_entries=10, max_delta_bytes=16)
    ring.append(1, _data(0))
    for seq, delta in [(2, "ab"), (3, "cd"), (4, "ef")]:
        ring.append(seq, _text("t", delta))
    ring.append(5, _data(1))
    replays = {cursor: list(ring.entries_after(cursor)) for cursor in range(6)}
    assert replays == {
        0: [(1, _data(0)), (4, _text("t", "abcdef")), (5, _data(1))],
        1: [(4, _text("t", "abcdef")), (5, _data(1))],
        2: [(4, _text("t", "cdef")), (5, _data(1))],
        3: [(4, _text("t", "ef")), (5, _data(1))],
        4: [(5, _data(1))],
        5: [],
    }


# -- capacity, eviction and the approval pin ------------------------------------------------


@pytest.mark.parametrize(
    ("appended", "kept", "dropped"),
    [(0, 0, 0), (1, 1, 0), (2, 2, 0), (3, 3, 0), (4, 3, 1), (5, 3, 2), (9, 3, 6)],
)
def test_the_ring_keeps_exactly_max_entries_and_counts_the_dropped(
    appended: int, kept: int, dropped: int
) -> None:
    ring = ReplayRing(max_entries=3)
    for n in range(1, appended + 1):
        ring.append(n, _data(n))
    assert len(ring) == kept
    assert ring.chunks() == [_data(n) for n in range(appended - kept + 1, appended + 1)]
    assert ring.dropped == dropped
    assert ring.evicted_seq == dropped  # the newest evicted entry carried seq ``dropped``
    assert ring.covers(dropped)
    assert not ring.covers(dropped - 1)


def test_a_split_delta_counts_one_entry_per_piece() -> None:
    ring = ReplayRing(max_entries=2, max_delta_bytes=16)
    ring.append(1, _data(1))
    ring.append(2, _text("t", "a" * 40))  # three pieces: 16 + 16 + 8
    assert _texts(ring) == ["a" * 16, "a" * 8]
    assert ring.dropped == 2
    # Eviction stopped inside the delta: a cursor before it is no longer covered.
    assert ring.evicted_seq == 2
    assert not ring.covers(1)


def test_a_pinned_ring_drops_nothing_until_unpinned() -> None:
    ring = ReplayRing(max_entries=2)
    ring.append(1, _data(1))
    ring.pinned = True
    for n in range(2, 7):
        ring.append(n, _data(n))
    assert len(ring) == 6
    assert ring.dropped == 0
    assert ring.covers(0)
    ring.unpin()
    assert ring.pinned is False
    assert ring.chunks() == [_data(5), _data(6)]
    assert ring.dropped == 4
    assert ring.evicted_seq == 4
    # Unpinned again: one in, one out.
    ring.append(7, _data(7))
    assert ring.chunks() == [_data(6), _data(7)]
    assert ring.dropped == 5


def test_unpinning_a_ring_within_capacity_drops_nothing() -> None:
    ring = ReplayRing(max_entries=3)
    ring.pinned = True
    for n in range(1, 4):
        ring.append(n, _data(n))
    ring.unpin()
    assert len(ring) == 3
    assert ring.dropped == 0
    assert ring.evicted_seq == 0
