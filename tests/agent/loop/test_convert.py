"""UI messages -> pydantic-ai messages: files, assistant steps, tool results, steer wrapping."""

from __future__ import annotations

import copy

from pydantic_ai.messages import (
    BinaryContent,
    DocumentUrl,
    ImageUrl,
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    SystemPromptPart,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from drupe.agent.chunker import StepChunker, ui_finish_reason
from drupe.agent.convert import STEER_REMINDER, steer_wrap, to_model_messages
from drupe.chunks.accumulate import accumulate
from drupe.chunks.types import UIMessage


def _assistant_two_steps() -> UIMessage:
    return {
        "id": "a1",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {"type": "reasoning", "text": "think", "state": "done"},
            {"type": "text", "text": "Looking.", "state": "done"},
            {
                "type": "tool-search",
                "toolCallId": "s1",
                "state": "output-available",
                "input": {"q": "x"},
                "output": ["r1"],
            },
            {
                "type": "dynamic-tool",
                "toolName": "mcp__fs__read",
                "toolCallId": "s2",
                "state": "output-error",
                "input": {"p": "/"},
                "errorText": "denied by fs",
            },
            {"type": "data-retry", "data": {"attempt": 2}},
            {"type": "step-start"},
            {"type": "text", "text": "Found r1.", "state": "done"},
            {"type": "source-url", "sourceId": "x", "url": "https://example.com"},
        ],
    }


def test_user_text_and_files() -> None:
    messages: list[UIMessage] = [
        {"id": "s", "role": "system", "parts": [{"type": "text", "text": "rules"}]},
        {
            "id": "u1",
            "role": "user",
            "parts": [
                {"type": "text", "text": "look at these"},
                {"type": "file", "mediaType": "image/png", "url": "https://x.test/a.png"},
                {"type": "file", "mediaType": "application/pdf", "url": "https://x.test/b.pdf"},
                {"type": "file", "mediaType": "text/plain", "url": "data:text/plain;base64,aGk="},
                {"type": "data-knowledge-scope", "data": {"kb": 1}},
            ],
        },
    ]
    system, prompt = to_model_messages(messages)
    assert isinstance(system, ModelRequest)
    assert system.parts == [SystemPromptPart(content="rules", timestamp=system.parts[0].timestamp)]
    assert isinstance(prompt, ModelRequest)
    part = prompt.parts[0]
    assert isinstance(part, UserPromptPart)
    assert isinstance(part.content, list)
    text, image, document, binary = part.content
    assert text == "look at these"
    assert isinstance(image, ImageUrl) and image.url == "https://x.test/a.png"
    assert isinstance(document, DocumentUrl) and document.media_type == "application/pdf"
    assert isinstance(binary, BinaryContent) and binary.data == b"hi"


def test_assistant_steps_become_responses_with_their_tool_returns() -> None:
    converted = to_model_messages([_assistant_two_steps()])
    assert [type(m).__name__ for m in converted] == [
        "ModelResponse",
        "ModelRequest",
        "ModelResponse",
    ]
    first, returns, second = converted
    assert isinstance(first, ModelResponse)
    assert [type(p) for p in first.parts] == [ThinkingPart, TextPart, ToolCallPart, ToolCallPart]
    calls = [p for p in first.parts if isinstance(p, ToolCallPart)]
    assert [(c.tool_name, c.tool_call_id, c.args) for c in calls] == [
        ("search", "s1", {"q": "x"}),
        ("mcp__fs__read", "s2", {"p": "/"}),
    ]
    assert isinstance(returns, ModelRequest)
    ok, failed = returns.parts
    assert isinstance(ok, ToolReturnPart) and ok.content == ["r1"] and ok.outcome == "success"
    assert isinstance(failed, ToolReturnPart)
    assert (failed.content, failed.outcome) == ("denied by fs", "failed")
    assert isinstance(second, ModelResponse)
    assert second.parts == [TextPart(content="Found r1.")]


def test_unanswered_calls_are_interrupted_except_in_the_open_tail() -> None:
    pending: UIMessage = {
        "id": "a1",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {
                "type": "tool-rm",
                "toolCallId": "r1",
                "state": "approval-responded",
                "input": {},
                "approval": {"id": "ap1", "approved": True},
            },
            {"type": "tool-ls", "toolCallId": "l1", "state": "input-available", "input": {}},
            {"type": "tool-cat", "toolCallId": "c1", "state": "input-streaming"},
        ],
    }
    closed = to_model_messages([pending])
    assert isinstance(closed[-1], ModelRequest)
    assert [(p.tool_call_id, p.outcome) for p in closed[-1].parts] == [  # type: ignore[union-attr]
        ("r1", "interrupted"),
        ("l1", "interrupted"),
    ]
    response = closed[0]
    assert isinstance(response, ModelResponse)
    assert [p.tool_call_id for p in response.parts] == ["r1", "l1"]  # type: ignore[union-attr]

    tail = to_model_messages([pending], open_tail=True)
    assert isinstance(tail[-1], ModelRequest)
    assert [p.tool_call_id for p in tail[-1].parts] == ["l1"]  # type: ignore[union-attr]


def test_a_progress_snapshot_is_no_result_the_call_was_interrupted() -> None:
    stopped: UIMessage = {
        "id": "a1",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {"type": "tool-ask", "toolCallId": "k1", "state": "output-available", "input": {},
             "output": {"text": "half"}, "preliminary": True},
        ],
    }  # fmt: skip
    (_, returns) = to_model_messages([stopped])
    assert isinstance(returns, ModelRequest)
    (returned,) = returns.parts
    assert isinstance(returned, ToolReturnPart) and returned.outcome == "interrupted"
    assert "half" not in str(returned.content)


def test_denied_call_tells_the_model_the_reason() -> None:
    message: UIMessage = {
        "id": "a1",
        "role": "assistant",
        "parts": [
            {
                "type": "tool-rm",
                "toolCallId": "r1",
                "state": "output-denied",
                "input": {"path": "/"},
                "approval": {"id": "ap1", "approved": False, "reason": "too risky"},
            }
        ],
    }
    _, returns = to_model_messages([message])
    assert isinstance(returns, ModelRequest)
    (denied,) = returns.parts
    assert isinstance(denied, ToolReturnPart)
    assert denied.outcome == "denied"
    assert "too risky" in str(denied.content)


def test_steer_wrapping_touches_only_the_last_user_message_and_never_the_dicts() -> None:
    history: list[UIMessage] = [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "first"}]},
        _assistant_two_steps(),
        {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "steer me"}]},
    ]
    before = copy.deepcopy(history)
    converted = to_model_messages(history, wrap_last_user_as_steer=True)
    assert history == before
    first, last = converted[0], converted[-1]
    assert isinstance(first, ModelRequest) and isinstance(last, ModelRequest)
    assert first.parts[0].content == "first"  # type: ignore[union-attr]
    assert last.parts[0].content == steer_wrap("steer me")  # type: ignore[union-attr]
    assert steer_wrap("steer me") == STEER_REMINDER.format(text="steer me")
    assert "<system-reminder>" in steer_wrap("x") and "</system-reminder>" in steer_wrap("x")


def test_finish_reason_mapping() -> None:
    assert ui_finish_reason("stop", has_tool_calls=False) == "stop"
    assert ui_finish_reason("tool_call", has_tool_calls=True) == "tool-calls"
    assert ui_finish_reason("content_filter", has_tool_calls=False) == "content-filter"
    assert ui_finish_reason(None, has_tool_calls=True) == "tool-calls"
    assert ui_finish_reason(None, has_tool_calls=False) == "stop"


def test_thinking_signatures_round_trip_through_chunks_and_the_ui_message() -> None:
    chunker = StepChunker(known_tools=(), new_id=lambda: "r1")
    signed = ThinkingPart(content="hmm", signature="sig-123", provider_name="anthropic")
    chunks = [
        {"type": "start", "messageId": "a1"},
        {"type": "start-step"},
        *chunker.feed(PartStartEvent(index=0, part=ThinkingPart(content="hmm"))),
        *chunker.feed(PartEndEvent(index=0, part=signed)),
        {"type": "finish-step"},
    ]
    assert chunks[-2]["providerMetadata"] == {
        "drupe": {"signature": "sig-123", "providerName": "anthropic"}
    }
    message = accumulate(chunks)
    (response,) = to_model_messages([message])
    assert isinstance(response, ModelResponse)
    (thinking,) = response.parts
    assert isinstance(thinking, ThinkingPart)
    assert (thinking.content, thinking.signature, thinking.provider_name) == (
        "hmm",
        "sig-123",
        "anthropic",
    )


def test_chunker_closes_a_replaced_part_and_reopens_after_a_late_delta() -> None:
    ids = iter(["t1", "t2", "t3"])
    chunker = StepChunker(known_tools=(), new_id=lambda: next(ids))
    chunks = [
        *chunker.feed(PartStartEvent(index=0, part=TextPart(content="a"))),
        *chunker.feed(PartStartEvent(index=0, part=TextPart(content="b"))),
        *chunker.feed(PartEndEvent(index=0, part=TextPart(content="b"))),
        *chunker.feed(PartDeltaEvent(index=0, delta=TextPartDelta(content_delta="c"))),
        *chunker.finish(ModelResponse(parts=[TextPart(content="bc")])),
    ]
    assert chunks == [
        {"type": "text-start", "id": "t1"},
        {"type": "text-delta", "id": "t1", "delta": "a"},
        {"type": "text-end", "id": "t1"},
        {"type": "text-start", "id": "t2"},
        {"type": "text-delta", "id": "t2", "delta": "b"},
        {"type": "text-end", "id": "t2"},
        {"type": "text-start", "id": "t3"},
        {"type": "text-delta", "id": "t3", "delta": "c"},
        {"type": "text-end", "id": "t3"},
    ]
