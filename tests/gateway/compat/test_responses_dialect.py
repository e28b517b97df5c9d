"""The pure Responses dialect: input items -> UI messages, and UI chunks -> events that the
``openai`` package's own ``ResponseStreamEvent`` union parses (an independent check of every
frame's shape), in the documented order."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import orjson
import pytest
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from drupe.chunks.types import Chunk
from drupe.gateway.prompt import GatewayFailure
from drupe.gateway.responses_dialect import ResponsesDialect
from drupe.gateway.responses_input import parse_responses_request

EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
TOOL = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}


class Refused(Exception):
    pass


def refuse(message: str) -> Exception:
    return Refused(message)


def frames(raw: list[bytes]) -> list[Any]:
    """Each ``event:``/``data:`` frame parsed by the SDK's union; the two names must agree."""
    parsed = []
    for block in b"".join(raw).split(b"\n\n"):
        if not block:
            continue
        name, data = block.split(b"\n")
        event = EVENTS.validate_python(orjson.loads(data.removeprefix(b"data: ")))
        assert name == b"event: " + event.type.encode()
        parsed.append(event)
    return parsed


def dialect(**body: Any) -> ResponsesDialect:
    parsed = parse_responses_request({"model": "m:x", "input": "hi", **body}, refuse)
    return ResponsesDialect(parsed, response_id="resp_test")


def test_reasoning_text_a_call_and_a_length_finish_make_an_incomplete_response() -> None:
    d = dialect(tools=[TOOL], max_output_tokens=5)
    chunks: list[Chunk] = [
        {"type": "start", "messageId": "m1"},
        {"type": "reasoning-start", "id": "r1"},
        {"type": "reasoning-delta", "id": "r1", "delta": "Think."},
        {"type": "reasoning-end", "id": "r1"},
        {"type": "text-start", "id": "t1"},
        {"type": "text-delta", "id": "t1", "delta": "Hel"},
        {"type": "text-delta", "id": "t1", "delta": "lo"},
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": "get_weather"},
        {"type": "tool-input-start", "toolCallId": "c2", "toolName": "server_side_tool"},
        {"type": "tool-input-available", "toolCallId": "c1", "input": {"city": "Oslo"}},
        {"type": "message-metadata", "messageMetadata": {"usage": {"inputTokens": 3}}},
        {"type": "finish", "finishReason": "length"},
    ]
    raw = [frame for chunk in chunks for frame in d.feed(chunk)] + d.finish()
    events = frames(raw)
    assert [e.type for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",  # a call closes the open message
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.incomplete",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    final = events[-1].response
    assert final.status == "incomplete"
    assert final.incomplete_details.reason == "max_output_tokens"
    assert [item.type for item in final.output] == ["reasoning", "message", "function_call"]
    assert final.output[1].content[0].text == "Hello"
    assert (final.output[2].name, final.output[2].arguments) == ("get_weather", '{"city":"Oslo"}')
    assert [i.output_index for i in events if i.type == "response.output_item.added"] == [0, 1, 2]
    assert final.usage.input_tokens == 3
    assert d.body()["status"] == "incomplete"


def test_a_body_taken_before_finish_loses_no_closing_event() -> None:
    d = dialect()
    raw = d.feed({"type": "text-delta", "id": "t", "delta": "no finish chunk came"})
    body = d.body()  # what the store keeps, taken before the success frames
    events = frames(raw + d.finish())
    assert [e.type for e in events][-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].response.model_dump(mode="json") == body


def test_an_error_after_output_is_an_error_event_then_response_failed() -> None:
    d = dialect()
    raw = d.feed({"type": "text-delta", "id": "t", "delta": "part"})
    raw.append(d.error_frame(GatewayFailure(502, "upstream", "upstream broke")))
    events = frames(raw)
    assert [e.type for e in events][-2:] == ["error", "response.failed"]
    assert events[-2].message == "upstream broke" and events[-2].code == "upstream_error"
    failed = events[-1].response
    assert failed.status == "failed" and failed.error.message == "upstream broke"
    assert failed.output[0].status == "in_progress"  # the message never finished


def test_input_items_map_to_one_assistant_message_per_step() -> None:
    parsed = parse_responses_request(
        {
            "model": "m:x",
            "instructions": "Rules.",
            "input": [
                {"role": "developer", "content": "Be kind."},
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "go"}],
                },
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}]},
                {"type": "function_call", "call_id": "c1", "name": "run", "arguments": '{"x": 1}'},
                {"type": "function_call_output", "call_id": "c1", "output": "done"},
                {"role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
                {"role": "user", "content": "thanks"},
            ],
        },
        refuse,
    )
    spec = parsed.spec("m:x", [], refuse)
    roles = [m["role"] for m in spec.messages]
    assert roles == ["system", "system", "user", "assistant", "user"]
    assistant = spec.messages[3]["parts"]
    assert assistant[0] == {"type": "reasoning", "text": "plan"}
    assert assistant[1]["toolCallId"] == "c1" and assistant[1]["input"] == {"x": 1}
    assert assistant[1]["state"] == "output-available" and assistant[1]["output"] == "done"
    assert assistant[2] == {"type": "text", "text": "ok"}


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"input": []}, "non-empty array"),
        ({"input": "x", "background": True}, "'background' is not supported"),
        ({"input": "x", "text": {"format": {"type": "json_schema"}}}, "structured outputs"),
        ({"input": "x", "tool_choice": "required"}, "needs at least one tool"),
        ({"input": "x", "metadata": {"k": 1}}, "'metadata' values must be strings"),
        ({"input": "x", "max_output_tokens": 0}, "positive integer"),
        ({"input": [{"role": "tool", "content": "x"}]}, "unsupported role 'tool'"),
        ({"input": [{"role": "user", "content": [{"type": "input_image"}]}]}, "image_url"),
    ],
)
def test_bad_bodies_are_refused_with_a_message(body: dict[str, Any], needle: str) -> None:
    with pytest.raises(Refused, match=None) as caught:
        parse_responses_request({"model": "m:x", **body}, refuse).spec("m:x", [], refuse)
    assert needle in str(caught.value)


def test_tool_choice_forces_a_named_function_and_none_hides_the_tools() -> None:
    forced = parse_responses_request(
        {
            "model": "m:x",
            "input": "x",
            "tools": [TOOL],
            "tool_choice": {"type": "function", "name": "get_weather"},
        },
        refuse,
    )
    hidden = parse_responses_request(
        {"model": "m:x", "input": "x", "tools": [TOOL], "tool_choice": "none"}, refuse
    )
    assert forced.model_settings == {"tool_choice": ["get_weather"]}
    assert [t.name for t in forced.tools] == ["get_weather"]
    assert hidden.tools == [] and hidden.tool_specs == [
        {**TOOL, "description": None, "strict": False}
    ]


def test_building_the_gateway_router_imports_neither_openai_nor_mcp() -> None:
    """Boot (P7) does not pay for the openai types or the MCP SDK: the first request does."""
    script = (
        "import sys\n"
        "import drupe.api.app_factory, drupe.gateway.router\n"
        "print(sorted(m for m in ('openai', 'mcp') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
