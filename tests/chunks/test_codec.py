"""``drupe.chunks.codec``: JSON round trips and validation of untrusted chunks."""

from __future__ import annotations

import random
from typing import Any

import pytest

from chunks.conftest import NodeRunner, load_sequences
from chunks.sequences import random_sequence
from drupe.chunks.codec import dumps, loads, validate_chunk
from drupe.errors import ValidationError


def _valid_chunks() -> list[dict[str, Any]]:
    chunks = [c for case in load_sequences().values() for c in case["chunks"]]
    for index in range(40):
        chunks += random_sequence(random.Random(index))[0]
    chunks += [
        {"type": "tool-approval-request", "approvalId": "a", "toolCallId": "c", "signature": "s"},
        {"type": "tool-input-start", "toolCallId": "c", "toolName": "t", "inputEncoding": "text"},
        {
            "type": "tool-output-error",
            "toolCallId": "c",
            "errorText": "e",
            "toolMetadata": {"k": 1},
        },
        {"type": "abort", "reason": "stop"},
        {"type": "text-start", "id": "t", "someFutureKey": [1]},
    ]
    unique = {dumps(c): c for c in chunks}
    return list(unique.values())


def _mutations(chunk: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    for key in chunk:
        if key == "type":
            continue
        out.append({k: v for k, v in chunk.items() if k != key})
        wrongs: tuple[Any, ...] = (None, 1, "s", True, [], {"x": "y"})
        for wrong in wrongs:
            if wrong != chunk[key]:
                out.append({**chunk, key: wrong})
    return out


def _candidates() -> list[Any]:
    valid = _valid_chunks()
    values: list[Any] = list(valid)
    for chunk in valid[:150]:
        values += _mutations(chunk)
    values += [
        {"type": "text-start"},
        {"type": "no-such-type"},
        {"type": "reset-step"},
        {"type": "tool-approval-response", "approvalId": "a", "approved": True},
        {"type": 3},
        {"id": "x"},
        [],
        "start",
        None,
        {"type": "finish", "finishReason": "unknown"},
        {"type": "data-x"},
        {"type": "data-x", "data": None, "transient": "yes"},
        {"type": "source-url", "sourceId": "s", "url": "u", "providerMetadata": {"p": 1}},
        {"type": "file", "url": "u", "mediaType": "m", "providerMetadata": {"p": {"a": [1]}}},
    ]
    unique = {repr(v): v for v in values}
    return list(unique.values())


def _accepts(value: Any) -> bool:
    try:
        validate_chunk(value)
    except ValidationError:
        return False
    return True


@pytest.mark.node
def test_validate_chunk_agrees_with_the_sdk_schema(read_ui_message_stream: NodeRunner) -> None:
    values = _candidates()
    results = read_ui_message_stream(values, "validate.mjs")
    accepted = sum(r["ok"] for r in results)
    assert 200 < accepted < len(values) - 200  # both sides are well represented
    disagreements = [
        (value, result["ok"])
        for value, result in zip(values, results, strict=True)
        if _accepts(value) != result["ok"]
    ]
    assert disagreements == []


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([1], "must be a JSON object, got array"),
        ({"id": "x"}, "missing field 'type'"),
        ({"type": 1}, "field 'type' must be a string, got number"),
        ({"type": "nope"}, "unknown chunk type 'nope'"),
        ({"type": "data-"}, "unknown chunk type 'data-'"),
        ({"type": "text-delta", "id": "t"}, "chunk 'text-delta' is missing field 'delta'"),
        (
            {"type": "text-delta", "id": "t", "delta": 5},
            "field 'delta' must be a string, got number",
        ),
        ({"type": "start", "messageId": None}, "field 'messageId' must be a string, got null"),
        ({"type": "finish", "finishReason": "done"}, "field 'finishReason' must be one of"),
        ({"type": "data-x", "data": 1, "transient": 1}, "'transient' must be a boolean"),
        ({"type": "data-x"}, "chunk 'data-x' is missing field 'data'"),
        ({"type": "start-step", "x": {1, 2}}, "field 'x' is not a JSON value"),
    ],
)
def test_validate_chunk_says_what_is_wrong(value: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(")):
        validate_chunk(value)


def test_validate_chunk_returns_the_chunk_itself() -> None:
    chunk = {"type": "data-weather", "id": "w", "data": {"t": 1}, "transient": True}
    assert validate_chunk(chunk) is chunk


def test_dumps_and_loads_round_trip_every_recorded_chunk() -> None:
    for chunk in _valid_chunks():
        data = dumps(chunk)
        assert isinstance(data, bytes) and b"\n" not in data
        assert loads(data) == chunk
        assert loads(data.decode(), validate=True) == chunk


def test_loads_refuses_what_is_not_a_chunk() -> None:
    with pytest.raises(ValidationError, match="not valid JSON"):
        loads(b"{nope")
    with pytest.raises(ValidationError, match="string 'type'"):
        loads(b"[1]")
    with pytest.raises(ValidationError, match="missing field 'delta'"):
        loads(b'{"type": "text-delta", "id": "t"}', validate=True)
    assert loads(b'{"type": "text-delta"}') == {"type": "text-delta"}  # no validation by default


def test_every_recorded_and_generated_chunk_is_a_valid_wire_chunk() -> None:
    for chunk in _valid_chunks():
        assert validate_chunk(chunk) is chunk
