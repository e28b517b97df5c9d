"""``accumulate`` equals the real AI SDK (``readUIMessageStream`` under Node) on the same chunks."""

from __future__ import annotations

import random
from typing import Any

import pytest

from chunks.conftest import NodeRunner, load_sequences
from chunks.sequences import chaos_chunks, random_sequence
from drupe.chunks.accumulate import AccumulateError, Accumulator, accumulate
from drupe.chunks.replay import compact_replay
from drupe.chunks.types import Chunk, UIMessage

pytestmark = pytest.mark.node

SEQUENCES = load_sequences()


def _python_result(case: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    accumulator = Accumulator(case.get("seed"))
    try:
        for chunk in case["chunks"]:
            accumulator.push(chunk)
    except AccumulateError:
        return dict(accumulator.snapshot()), True
    return dict(accumulator.snapshot()), False


def test_there_are_at_least_twenty_valid_recorded_sequences() -> None:
    assert len([c for c in SEQUENCES.values() if not c.get("error")]) >= 20


def test_accumulate_equals_read_ui_message_stream_on_recorded_sequences(
    read_ui_message_stream: NodeRunner,
) -> None:
    cases = [{"name": name, **case} for name, case in SEQUENCES.items()]
    results = read_ui_message_stream(cases)
    assert [r["name"] for r in results] == list(SEQUENCES)
    mismatches = []
    for case, result in zip(cases, results, strict=True):
        mine, raised = _python_result(case)
        thrown = [e for e in result["errors"] if e["name"] != "Error" or case.get("error")]
        assert result["message"] is not None, case["name"]
        if mine != result["message"]:
            mismatches.append((case["name"], mine, result["message"]))
        assert raised == bool(case.get("error")), case["name"]
        assert bool(thrown) == raised, (case["name"], result["errors"])
    assert not mismatches, mismatches


def test_accumulate_raises_where_the_sdk_throws() -> None:
    for name, case in SEQUENCES.items():
        if case.get("error"):
            with pytest.raises(AccumulateError):
                accumulate(case["chunks"], seed=case.get("seed"))
        else:
            accumulate(case["chunks"], seed=case.get("seed"))
            assert name


def test_accumulate_equals_the_sdk_on_random_sequences_and_their_evicted_replays(
    read_ui_message_stream: NodeRunner,
) -> None:
    """200 random streams, and a compact replay of a random evicted suffix of each."""
    cases: list[dict[str, Any]] = []
    for index in range(200):
        rng = random.Random(index)
        chunks, seed = random_sequence(rng)
        cases.append({"name": f"random-{index}", "chunks": chunks, "seed": seed})
        evicted = rng.randint(0, len(chunks))
        replay = compact_replay(chunks[evicted:], seed=seed)
        cases.append({"name": f"replay-{index}-from-{evicted}", "chunks": replay, "seed": seed})
    results = read_ui_message_stream(cases)
    for case, result in zip(cases, results, strict=True):
        mine = accumulate(case["chunks"], seed=case["seed"])
        assert result["errors"] == [] or all(e["name"] == "Error" for e in result["errors"]), (
            case["name"],
            result["errors"],
        )
        if result["message"] is not None:
            assert mine == result["message"], case["name"]


def _fold_until_rejected(chunks: list[Chunk], seed: UIMessage | None) -> UIMessage:
    accumulator = Accumulator(seed)
    for chunk in chunks:
        try:
            accumulator.push(chunk)
        except AccumulateError:
            break
    return accumulator.snapshot()


def test_accumulate_equals_the_sdk_on_chaotic_sequences(read_ui_message_stream: NodeRunner) -> None:
    """Random chunk soup: the SDK and ``Accumulator`` reject the same chunk and agree before it."""
    cases: list[dict[str, Any]] = []
    for index in range(400):
        rng = random.Random(index)
        seed = _fold_until_rejected(chaos_chunks(rng), None) if index % 3 == 0 else None
        if seed is not None and rng.random() < 0.5:
            seed = {**seed, "id": "m1"}
        cases.append({"name": f"chaos-{index}", "chunks": chaos_chunks(rng), "seed": seed})
    results = read_ui_message_stream(cases)
    rejected = 0
    for case, result in zip(cases, results, strict=True):
        accumulator = Accumulator(case["seed"])
        raised = False
        for chunk in case["chunks"]:
            try:
                accumulator.push(chunk)
            except AccumulateError:
                raised = True
                break
        rejected += raised
        thrown = [e for e in result["errors"] if e["name"] != "Error"]
        assert raised == bool(thrown), (case["name"], result["errors"])
        if result["message"] is None:
            assert not accumulator.written, case["name"]
        else:
            assert accumulator.snapshot() == result["message"], case["name"]
    assert 40 < rejected < 300, rejected  # both outcomes are well represented
