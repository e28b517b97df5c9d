"""``Coalescer``: deltas wait at most one window, structure is never delayed, nothing changes."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from chunks.sequences import random_sequence
from drupe.chunks.accumulate import accumulate
from drupe.chunks.types import Chunk
from drupe.cluster.coalesce import Coalescer

DELTAS = {"text-delta", "reasoning-delta", "tool-input-delta"}


def _delta(text: str, part: str = "t1") -> Chunk:
    return {"type": "text-delta", "id": part, "delta": text}


def test_deltas_five_ms_apart_are_written_once_per_25_ms_window() -> None:
    coalescer = Coalescer(window=0.025)
    written: list[tuple[float, list[Chunk]]] = []
    for i in range(12):  # t = 0, 5, ..., 55 ms
        now = i * 0.005
        batch = coalescer.push(_delta(f"w{i} "), now)
        if batch is not None:
            written.append((now, batch))
    # Held since 0 ms: the delta at 25 ms finds the window over, writes 0-20 ms, starts anew.
    assert [(round(t * 1000), [c["delta"] for c in b]) for t, b in written] == [
        (25, ["w0 w1 w2 w3 w4 "]),
        (50, ["w5 w6 w7 w8 w9 "]),
    ]
    assert coalescer.due is not None and round(coalescer.due * 1000) == 75
    assert coalescer.flush() == [_delta("w10 w11 ")]
    assert coalescer.due is None and coalescer.flush() is None


def test_a_structural_chunk_is_written_at_once_with_what_was_held_before_it() -> None:
    coalescer = Coalescer(window=10.0)
    assert coalescer.push({"type": "text-start", "id": "t1"}, 0.0) == [
        {"type": "text-start", "id": "t1"}
    ]
    assert coalescer.push(_delta("a"), 0.001) is None
    assert coalescer.push(_delta("b"), 0.002) is None
    assert coalescer.push({"type": "text-end", "id": "t1"}, 0.003) == [
        _delta("ab"),
        {"type": "text-end", "id": "t1"},
    ]
    assert coalescer.batch_seqs == [0, 0]  # chunks pushed without a seq carry none


def test_the_byte_bound_writes_before_the_window_ends() -> None:
    coalescer = Coalescer(window=10.0, max_bytes=10)
    assert coalescer.push(_delta("12345"), 0.0) is None
    assert coalescer.push(_delta("67890"), 0.0) == [_delta("1234567890")]


def test_deltas_of_two_parts_stay_apart_and_in_order() -> None:
    coalescer = Coalescer(window=10.0)
    for chunk in (_delta("a", "t1"), _delta("b", "t2"), _delta("c", "t2"), _delta("d", "t1")):
        assert coalescer.push(chunk, 0.0) is None
    assert coalescer.flush() == [_delta("a", "t1"), _delta("bc", "t2"), _delta("d", "t1")]


@settings(max_examples=200, deadline=None)
@given(st.randoms(use_true_random=False), st.floats(min_value=0.001, max_value=0.05))
def test_the_written_batches_rebuild_the_same_message_and_respect_the_window(
    rng: random.Random, window: float
) -> None:
    chunks, seed = random_sequence(rng)
    coalescer = Coalescer(window=window, max_bytes=rng.choice([4, 64, 16 * 1024]))
    now = 0.0
    written: list[Chunk] = []
    held_since: float | None = None
    for chunk in chunks:
        now += rng.choice([0.0, 0.001, 0.004, 0.02, 0.1])
        if held_since is not None and now > held_since + window:
            # The shell's timer fires at ``due``: whatever is held is written by then.
            assert coalescer.due is not None and coalescer.due <= held_since + window + 1e-9
            written += coalescer.flush() or []
            held_since = None
        batch = coalescer.push(chunk, now)
        if batch is not None:
            written += batch
            held_since = None
            if chunk["type"] not in DELTAS:
                assert batch[-1] is chunk  # structure is written at once, last in its batch
        if coalescer.due is not None and held_since is None:
            held_since = now
    written += coalescer.flush() or []
    assert accumulate(written, seed=seed) == accumulate(chunks, seed=seed)
    assert [c["type"] for c in written if c["type"] not in DELTAS] == [
        c["type"] for c in chunks if c["type"] not in DELTAS
    ]


def test_each_batch_chunk_carries_the_seq_of_the_last_chunk_merged_into_it() -> None:
    coalescer = Coalescer(window=10.0)
    pushed: list[tuple[dict[str, object], int]] = [
        ({"type": "text-start", "id": "t1"}, 1),
        (_delta("a", "t1"), 2),
        (_delta("b", "t1"), 3),
        (_delta("c", "t2"), 4),
        (_delta("d", "t1"), 5),
        (_delta("e", "t1"), 6),
    ]
    for chunk, seq in pushed:
        batch = coalescer.push(chunk, 0.0, seq)
        if seq == 1:
            assert batch == [{"type": "text-start", "id": "t1"}]
            assert coalescer.batch_seqs == [1]
    assert coalescer.push({"type": "text-end", "id": "t1"}, 0.0, 7) == [
        _delta("ab", "t1"),
        _delta("c", "t2"),
        _delta("de", "t1"),
        {"type": "text-end", "id": "t1"},
    ]
    assert coalescer.batch_seqs == [3, 4, 6, 7]


def test_the_byte_bound_counts_from_the_start_of_each_batch() -> None:
    # After a window's end the delta that started the next batch counts toward the bound.
    coalescer = Coalescer(window=0.025, max_bytes=10)
    assert coalescer.push(_delta("aaaaaa"), 0.0) is None
    assert coalescer.push(_delta("bbbbbb"), 0.03) == [_delta("aaaaaa")]
    assert coalescer.push(_delta("cccc"), 0.031) == [_delta("bbbbbbcccc")]
    # A flush starts the count again from nothing: 3 bytes stay under a bound of 4, a 4th
    # reaches it.
    coalescer = Coalescer(window=10.0, max_bytes=4)
    assert coalescer.push(_delta("abc"), 0.0) is None
    assert coalescer.flush() == [_delta("abc")]
    assert coalescer.push(_delta("def"), 0.0) is None
    assert coalescer.push(_delta("g"), 0.0) == [_delta("defg")]


def test_a_flushed_run_carries_the_seq_of_its_last_delta() -> None:
    coalescer = Coalescer(window=10.0)
    for seq, text in ((4, "a"), (5, "b"), (6, "c")):
        assert coalescer.push(_delta(text), 0.0, seq) is None
    assert coalescer.flush() == [_delta("abc")]
    assert coalescer.batch_seqs == [6]
    reasoning = {"type": "reasoning-delta", "id": "r1", "delta": "x"}
    tool = {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "{"}
    for seq, chunk in ((7, reasoning), (8, reasoning), (9, tool), (10, tool), (11, _delta("d"))):
        assert coalescer.push(chunk, 0.0, seq) is None
    assert coalescer.flush() == [
        {"type": "reasoning-delta", "id": "r1", "delta": "xx"},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "{{"},
        _delta("d"),
    ]
    assert coalescer.batch_seqs == [8, 10, 11]
