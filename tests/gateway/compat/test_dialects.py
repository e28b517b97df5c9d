"""The pure parts of the dialects: history mapping, hidden tool calls, failure mapping."""

from __future__ import annotations

from typing import Any

import pytest

from drupe.gateway.anthropic_compat import AnthropicDialect, parse_messages_request
from drupe.gateway.openai_compat import OpenAIDialect, parse_chat_request
from drupe.gateway.prompt import GatewayFailure
from drupe.gateway.prompt_response import failure_of_terminal
from drupe.streaming.listeners.base import TerminalResult


class Refused(Exception):
    pass


def refuse(message: str) -> Exception:
    return Refused(message)


def test_anthropic_history_keeps_thinking_signatures_and_tool_errors() -> None:
    parsed = parse_messages_request(
        {
            "model": "scripted:echo",
            "system": [{"type": "text", "text": "Rules."}],
            "messages": [
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hmm", "signature": "sig-1"},
                        {"type": "tool_use", "id": "t1", "name": "run", "input": {"x": 1}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": "boom",
                            "is_error": True,
                        },
                        {"type": "text", "text": "try again"},
                    ],
                },
            ],
        },
        refuse,
    )
    system, user, assistant, follow_up = parsed.spec.messages
    assert system["role"] == "system" and system["parts"] == [{"type": "text", "text": "Rules."}]
    assert user["parts"] == [{"type": "text", "text": "go"}]
    reasoning, tool = assistant["parts"]
    assert reasoning["providerMetadata"] == {"drupe": {"signature": "sig-1"}}
    assert tool["state"] == "output-error" and tool["errorText"] == "boom"
    assert follow_up["parts"] == [{"type": "text", "text": "try again"}]


def test_openai_user_images_become_file_parts() -> None:
    url = "data:image/png;base64,iVBORw0KGgo="
    chat = parse_chat_request(
        {
            "model": "scripted:echo",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "what is it?"},
                        {"type": "image_url", "image_url": {"url": url}},
                    ],
                }
            ],
        },
        refuse,
    )
    [message] = chat.spec.messages
    assert message["parts"][1] == {"type": "file", "mediaType": "image/png", "url": url}


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"model": "m:x", "messages": []}, "non-empty"),
        ({"model": "m:x", "messages": [{"role": "user", "content": 3}]}, "string"),
        (
            {"model": "m:x", "messages": [{"role": "user", "content": "a"}], "max_tokens": 0},
            "max_tokens",
        ),
        ({"model": "m:x", "messages": [{"role": "user", "content": "a"}], "n": 2}, "n=1"),
    ],
)
def test_openai_bad_bodies_say_what_is_wrong(body: dict[str, Any], words: str) -> None:
    with pytest.raises(Refused, match=words):
        parse_chat_request(body, refuse)


def _tool_chunks(name: str) -> list[dict[str, Any]]:
    return [
        {"type": "start", "messageId": "m"},
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": name},
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": name, "input": {"a": 1}},
        {"type": "finish", "finishReason": "tool-calls"},
    ]


def test_only_declared_tool_calls_are_written_back() -> None:
    body = {"model": "m:x", "messages": [{"role": "user", "content": "a"}]}
    hidden = OpenAIDialect(parse_chat_request(body, refuse))
    for chunk in _tool_chunks("server_side"):
        hidden.feed(chunk)
    assert "tool_calls" not in hidden.body()["choices"][0]["message"]
    assert hidden.body()["choices"][0]["finish_reason"] == "stop"

    declared = {**body, "tools": [{"type": "function", "function": {"name": "mine"}}]}
    shown = OpenAIDialect(parse_chat_request(declared, refuse))
    frames = [frame for chunk in _tool_chunks("mine") for frame in shown.feed(chunk)]
    assert b'"arguments":"{\\"a\\":1}"' in b"".join(frames)
    assert shown.body()["choices"][0]["finish_reason"] == "tool_calls"

    anthropic = AnthropicDialect(
        parse_messages_request(
            {**body, "tools": [{"name": "mine", "input_schema": {"type": "object"}}]}, refuse
        )
    )
    for chunk in _tool_chunks("mine"):
        anthropic.feed(chunk)
    assert anthropic.body()["content"] == [
        {"type": "tool_use", "id": "c1", "name": "mine", "input": {"a": 1}}
    ]
    assert anthropic.body()["stop_reason"] == "tool_use"


def _terminal(status: str, **fields: Any) -> TerminalResult:
    return TerminalResult(
        status=status,  # type: ignore[arg-type]
        conversation_id="gateway:x",
        turn_id="t",
        execution_id="e",
        model_id="m:x",
        attempt_id=1,
        anchor_message_id=None,
        final_message=None,
        is_conversation_done=True,
        **fields,
    )


def test_failure_mapping() -> None:
    idle = failure_of_terminal(_terminal("paused", reason="idle-timeout"))
    stop = failure_of_terminal(_terminal("paused", reason="app-shutdown"))
    limited = failure_of_terminal(
        _terminal("error", error={"name": "ProviderError", "message": "slow", "statusCode": 429})
    )
    down = failure_of_terminal(_terminal("error", error={"name": "ProviderError", "message": "x"}))
    bug = failure_of_terminal(_terminal("error", error={"name": "KeyError", "message": "k"}))
    assert (idle.status, idle.kind) == (504, "timeout")
    assert (stop.status, stop.kind) == (504, "aborted")
    assert limited == GatewayFailure(429, "rate_limit", "slow")
    assert (down.status, down.kind) == (502, "upstream")
    assert (bug.status, bug.kind) == (500, "internal")
