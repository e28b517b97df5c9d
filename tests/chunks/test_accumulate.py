"""``drupe.chunks.accumulate``: the incremental fold (SDK equality: test_node_crosscheck)."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from chunks.conftest import NodeRunner, load_sequences
from chunks.sequences import random_sequence
from drupe.chunks.accumulate import AccumulateError, Accumulator, accumulate
from drupe.chunks.types import Chunk, UIMessage

SEQUENCES = load_sequences()


def _cases() -> list[tuple[str, list[Chunk], UIMessage | None]]:
    cases = [
        (name, c["chunks"], c.get("seed")) for name, c in SEQUENCES.items() if not c.get("error")
    ]
    for index in range(60):
        chunks, seed = random_sequence(random.Random(1000 + index))
        cases.append((f"random-{index}", chunks, seed))
    return cases


@pytest.mark.node
def test_every_intermediate_snapshot_equals_the_sdk_on_that_prefix(
    read_ui_message_stream: NodeRunner,
) -> None:
    """One accumulator per stream, a snapshot after every third chunk (and the last): each is
    what the real AI SDK (``readUIMessageStream`` under Node) yields for that prefix."""
    prefixes: list[dict[str, Any]] = []
    snapshots: list[tuple[UIMessage | None, bool]] = []
    for name, chunks, seed in _cases():
        accumulator = Accumulator(seed)
        for index, chunk in enumerate(chunks):
            accumulator.push(chunk)
            if index % 3 == 0 or index == len(chunks) - 1:
                prefix = chunks[: index + 1]
                prefixes.append({"name": f"{name}@{index}", "chunks": prefix, "seed": seed})
                snapshots.append((accumulator.snapshot(), accumulator.written))
    results = read_ui_message_stream(prefixes)
    assert len(results) == len(prefixes) > 500
    for case, result, (snapshot, written) in zip(prefixes, results, snapshots, strict=True):
        # ``error`` chunks reach onError as plain Errors; anything else would be a rejection
        thrown = [e for e in result["errors"] if e["name"] != "Error"]
        assert thrown == [], (case["name"], thrown)
        if result["message"] is None:  # the SDK yielded nothing yet: neither did we
            assert not written, case["name"]
        else:
            assert snapshot == result["message"], case["name"]


@pytest.mark.parametrize(
    ("name", "chunks", "seed"), _cases(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_chunks_and_seed_are_never_mutated(
    name: str, chunks: list[Chunk], seed: UIMessage | None
) -> None:
    before = copy.deepcopy((chunks, seed))
    accumulator = Accumulator(seed)
    for chunk in chunks:
        accumulator.push(chunk)
        accumulator.snapshot()
    message = accumulator.snapshot()
    _scribble(message)
    assert (chunks, seed) == before


def _scribble(value: Any) -> None:
    if isinstance(value, dict):
        for v in value.values():
            _scribble(v)
        value["scribbled"] = True
    elif isinstance(value, list):
        for v in value:
            _scribble(v)
        value.append("scribbled")


def test_snapshots_are_independent_copies() -> None:
    chunks = SEQUENCES["dynamic_tools"]["chunks"]
    accumulator = Accumulator()
    for chunk in chunks:
        accumulator.push(chunk)
    first = accumulator.snapshot()
    untouched = copy.deepcopy(first)
    _scribble(first)
    assert accumulator.snapshot() == untouched
    assert untouched["parts"]  # the sequence did build a message


@pytest.mark.parametrize("name", [n for n, c in SEQUENCES.items() if c.get("error")])
def test_a_rejected_chunk_changes_nothing(name: str) -> None:
    case = SEQUENCES[name]
    accumulator = Accumulator(case.get("seed"))
    for chunk in case["chunks"]:
        before = accumulator.snapshot()
        try:
            accumulator.push(chunk)
        except AccumulateError:
            assert accumulator.snapshot() == before
            return
    pytest.fail("the sequence was expected to be rejected")


def test_error_messages_are_the_sdk_messages() -> None:
    accumulator = Accumulator()
    with pytest.raises(
        AccumulateError, match=r'Received text-delta for missing text part with ID "x"'
    ):
        accumulator.push({"type": "text-delta", "id": "x", "delta": "a"})
    with pytest.raises(
        AccumulateError, match=r'reasoning-end for missing reasoning part with ID "r"'
    ):
        accumulator.push({"type": "reasoning-end", "id": "r"})
    with pytest.raises(AccumulateError, match=r'No tool invocation found for tool call ID "c"'):
        accumulator.push({"type": "tool-output-denied", "toolCallId": "c"})
    with pytest.raises(AccumulateError, match=r'Ensure a "tool-input-start" chunk is sent'):
        accumulator.push({"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": "{"})
    assert issubclass(AccumulateError, ValueError)


def test_stream_level_state_beside_the_message() -> None:
    accumulator = Accumulator()
    assert not accumulator.written
    for chunk in [
        {"type": "start", "messageId": "m"},
        {"type": "error", "errorText": "boom"},
        {"type": "finish", "finishReason": "error"},
        {"type": "abort", "reason": "user"},
    ]:
        accumulator.push(chunk)
    assert accumulator.written
    assert accumulator.message_id == "m"
    assert accumulator.error_texts == ["boom"]
    assert accumulator.finish_reason == "error"
    assert accumulator.aborted
    assert dict(accumulator.snapshot()) == {"id": "m", "role": "assistant", "parts": []}


def test_without_any_yield_the_result_is_the_seed_or_an_empty_message() -> None:
    assert dict(accumulate([{"type": "start-step"}])) == {
        "id": "",
        "role": "assistant",
        "parts": [],
    }
    seed: UIMessage = {"id": "s", "role": "assistant", "parts": [{"type": "text", "text": "x"}]}
    assert accumulate([{"type": "start"}, {"type": "start-step"}], seed=seed) == seed


def test_many_small_deltas_fold_into_one_text() -> None:
    deltas = [f"{i % 10}" for i in range(50_000)]
    chunks: list[Chunk] = [{"type": "start"}, {"type": "text-start", "id": "t"}]
    chunks += [{"type": "text-delta", "id": "t", "delta": d} for d in deltas]
    chunks += [{"type": "tool-input-start", "toolCallId": "c", "toolName": "w"}]
    chunks += [
        {"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": p}
        for p in ['{"a', '":"', "x" * 10, '"}'] * 1
    ]
    message = accumulate(chunks)
    assert message["parts"][0]["text"] == "".join(deltas)
    assert message["parts"][1]["input"] == {"a": "x" * 10}
