"""``drupe.chunks.normalize``: the persistence listener's pure clean-ups."""

from __future__ import annotations

import copy
from typing import Literal

import pytest

from drupe.chunks.normalize import (
    append_error_part,
    drop_transient_parts,
    finalize_interrupted_parts,
    strip_empty_parts,
)
from drupe.chunks.types import UIMessage


def _message() -> UIMessage:
    return {
        "id": "m",
        "role": "assistant",
        "metadata": {"usage": {"in": 1}},
        "parts": [
            {"type": "step-start"},
            {"type": "reasoning", "id": "r", "text": "thinking", "state": "streaming"},
            {"type": "reasoning", "id": "r2", "text": " \n", "state": "done"},
            {"type": "text", "text": "", "state": "streaming"},
            {"type": "text", "text": "Hello", "state": "streaming"},
            {"type": "tool-a", "toolCallId": "1", "state": "input-streaming", "rawInput": '{"x'},
            {"type": "tool-a", "toolCallId": "2", "state": "input-available", "input": {}},
            {
                "type": "tool-a",
                "toolCallId": "3",
                "state": "approval-requested",
                "input": {},
                "approval": {"id": "ap"},
            },
            {
                "type": "dynamic-tool",
                "toolName": "d",
                "toolCallId": "4",
                "state": "input-available",
            },
            {
                "type": "tool-a",
                "toolCallId": "5",
                "state": "output-available",
                "input": {},
                "output": 1,
            },
            {
                "type": "tool-a",
                "toolCallId": "6",
                "state": "output-available",
                "input": {},
                "output": {"partial": True},
                "preliminary": True,
            },
            {"type": "tool-a", "toolCallId": "7", "state": "output-error", "errorText": "x"},
            {"type": "tool-a", "toolCallId": "8", "state": "output-denied", "input": {}},
            {"type": "data-retry", "data": {"attempt": 1}},
            {"type": "data-error", "data": {"message": "old"}},
        ],
    }


@pytest.mark.parametrize(
    ("status", "text"),
    [("paused", "Interrupted by user"), ("error", "Stream errored before tool completed")],
)
def test_finalize_closes_open_tool_parts_and_streaming_text(
    status: Literal["paused", "error"], text: str
) -> None:
    message = _message()
    before = copy.deepcopy(message)
    result = finalize_interrupted_parts(message, status)
    assert message == before
    by_call = {p["toolCallId"]: p for p in result["parts"] if "toolCallId" in p}
    for call_id in ("1", "2", "3", "4", "6"):
        assert by_call[call_id]["state"] == "output-error"
        assert by_call[call_id]["errorText"] == text
    assert by_call["1"]["rawInput"] == '{"x'
    assert by_call["3"]["approval"] == {"id": "ap"}
    assert "output" not in by_call["6"] and "preliminary" not in by_call["6"]
    assert by_call["5"] is message["parts"][9]  # untouched parts are shared
    assert by_call["7"]["errorText"] == "x"
    assert by_call["8"]["state"] == "output-denied"
    states = [p.get("state") for p in result["parts"] if p["type"] in ("text", "reasoning")]
    assert states == ["done", "done", "done", "done"]
    assert result["metadata"] == message["metadata"]


def test_strip_empty_parts_drops_blank_text_and_reasoning() -> None:
    message = _message()
    result = strip_empty_parts(message)
    texts = [p["text"] for p in result["parts"] if p["type"] in ("text", "reasoning")]
    assert texts == ["thinking", "Hello"]
    assert len(message["parts"]) == 15


def test_drop_transient_parts() -> None:
    message = _message()
    assert "data-retry" not in [p["type"] for p in drop_transient_parts(message)["parts"]]
    result = drop_transient_parts(message, {"data-retry", "step-start"})
    assert {"data-retry", "step-start"}.isdisjoint(p["type"] for p in result["parts"])
    assert len(message["parts"]) == 15


def test_append_error_part_keeps_exactly_one() -> None:
    message = _message()
    result = append_error_part(message, {"name": "ProviderError", "message": "new"})
    errors = [p for p in result["parts"] if p["type"] == "data-error"]
    assert errors == [{"type": "data-error", "data": {"name": "ProviderError", "message": "new"}}]
    assert result["parts"][-1] is errors[0]
    assert message["parts"][-1]["data"] == {"message": "old"}
    again = append_error_part(append_error_part(result, {"message": "a"}), {"message": "b"})
    assert [p["data"] for p in again["parts"] if p["type"] == "data-error"] == [{"message": "b"}]
    empty: UIMessage = {"id": "m", "role": "assistant", "parts": []}
    assert append_error_part(empty, {"message": "x"})["parts"] == [
        {"type": "data-error", "data": {"message": "x"}}
    ]
    assert empty["parts"] == []
