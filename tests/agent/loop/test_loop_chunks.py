"""The chunk sequence of a turn: text, reasoning, tools over two steps, caps held back as errors."""

from __future__ import annotations

import dataclasses

import pytest
from loop_support import Script, add_tool, collect, request, runner_for, tool, types, user
from pydantic_ai.messages import ModelRequest, ToolReturnPart

from drupe.agent.loop import LoopLimitError
from drupe.chunks.accumulate import accumulate


async def test_text_turn_chunk_sequence_starts_with_the_placeholder_id() -> None:
    script = Script([["Hello", " world"]])
    chunks = await collect(runner_for(script.model()), request([user("hi")]))

    assert chunks[0] == {"type": "start", "messageId": "placeholder-1"}
    assert types(chunks) == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-delta",
        "text-end",
        "finish-step",
        "message-metadata",
        "finish",
    ]
    assert chunks[-1] == {"type": "finish", "finishReason": "stop"}
    message = accumulate(chunks)
    assert message["id"] == "placeholder-1"
    assert [p for p in message["parts"] if p["type"] == "text"] == [
        {"type": "text", "text": "Hello world", "state": "done"}
    ]


async def test_two_step_tool_turn_executes_the_tool_and_feeds_the_result_back() -> None:
    script = Script(
        [
            [("think", "need maths"), ("call", "call-1", "add", '{"a": 1,'), ("args", ' "b": 2}')],
            ["It is ", "3."],
        ]
    )
    req = request([user("what is 1+2?")], tools=[add_tool()], system="be terse")
    chunks = await collect(runner_for(script.model()), req)

    assert types(chunks) == [
        "start",
        "start-step",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-delta",
        "tool-input-available",
        "tool-output-available",
        "finish-step",
        "message-metadata",
        "start-step",
        "text-start",
        "text-delta",
        "text-delta",
        "text-end",
        "finish-step",
        "message-metadata",
        "finish",
    ]
    available = next(c for c in chunks if c["type"] == "tool-input-available")
    assert available == {
        "type": "tool-input-available",
        "toolCallId": "call-1",
        "toolName": "add",
        "input": {"a": 1, "b": 2},
    }
    output = next(c for c in chunks if c["type"] == "tool-output-available")
    assert output == {"type": "tool-output-available", "toolCallId": "call-1", "output": {"sum": 3}}

    # the second request carries the tool return; both saw the system prompt and the tool
    second = script.seen[1]
    assert isinstance(second[-1], ModelRequest)
    returned = second[-1].parts[0]
    assert isinstance(returned, ToolReturnPart)
    assert (returned.tool_call_id, returned.content) == ("call-1", {"sum": 3})
    assert [info.instructions for info in script.infos] == ["be terse", "be terse"]
    assert [t.name for t in script.infos[0].function_tools] == ["add"]

    message = accumulate(chunks)
    assert message["id"] == "placeholder-1"
    assert [p["type"] for p in message["parts"]] == [
        "step-start",
        "reasoning",
        "tool-add",
        "step-start",
        "text",
    ]
    tool_part = message["parts"][2]
    assert tool_part["state"] == "output-available"
    assert tool_part["input"] == {"a": 1, "b": 2}
    assert tool_part["output"] == {"sum": 3}
    assert message["parts"][4]["text"] == "It is 3."


async def test_tool_call_cap_is_an_error_and_finish_is_held_back() -> None:
    script = Script(
        [
            [("call", "c1", "add", '{"a": 1, "b": 1}')],
            [("call", "c2", "add", '{"a": 2, "b": 2}')],
            ["never reached"],
        ]
    )
    runner = runner_for(script.model())
    chunks = []
    with pytest.raises(LoopLimitError) as caught:
        async for chunk in runner.stream(
            request([user("loop")], tools=[add_tool()], max_tool_calls=2)
        ):
            chunks.append(chunk)

    assert caught.value.code == "tool_call_limit_reached"
    assert "finish" not in types(chunks)
    assert types(chunks).count("tool-output-available") == 2
    assert types(chunks)[-2:] == ["finish-step", "message-metadata"]
    assert len(script.replies) == 1  # the third request was never made


async def test_step_cap_is_an_error() -> None:
    script = Script([[("call", f"c{i}", "add", '{"a": 1, "b": 1}')] for i in range(3)])
    runner = runner_for(script.model())
    chunks = []
    with pytest.raises(LoopLimitError) as caught:
        async for chunk in runner.stream(request([user("x")], tools=[add_tool()], max_steps=2)):
            chunks.append(chunk)
    assert caught.value.code == "step_limit_reached"
    assert types(chunks).count("start-step") == 2
    assert "finish" not in types(chunks)


async def test_invalid_and_unknown_tool_calls_are_reported_and_the_model_sees_why() -> None:
    script = Script(
        [
            [("call", "bad", "add", '{"a": 1'), ("call", "ghost", "nope", "{}")],
            ["sorry"],
        ]
    )
    chunks = await collect(runner_for(script.model()), request([user("x")], tools=[add_tool()]))

    errors = [c for c in chunks if c["type"] == "tool-input-error"]
    assert [(c["toolCallId"], c["toolName"]) for c in errors] == [("bad", "add"), ("ghost", "nope")]
    assert "Invalid JSON" in errors[0]["errorText"]
    assert "unavailable tool 'nope'" in errors[1]["errorText"]
    returns = script.seen[1][-1]
    assert isinstance(returns, ModelRequest)
    assert [p.outcome for p in returns.parts if isinstance(p, ToolReturnPart)] == [
        "failed",
        "failed",
    ]
    assert chunks[-1] == {"type": "finish", "finishReason": "stop"}
    message = accumulate(chunks)
    assert [p["state"] for p in message["parts"] if p["type"].startswith("tool-")] == [
        "output-error",
        "output-error",
    ]


async def test_a_throwing_tool_becomes_tool_output_error_and_the_turn_goes_on() -> None:
    def explode(args: object, ctx: object) -> object:
        raise ValueError("disk on fire")

    script = Script([[("call", "c1", "burn", "{}")], ["recovered"]])
    chunks = await collect(
        runner_for(script.model()), request([user("x")], tools=[tool("burn", explode)])
    )
    failure = next(c for c in chunks if c["type"] == "tool-output-error")
    assert failure == {"type": "tool-output-error", "toolCallId": "c1", "errorText": "disk on fire"}
    assert chunks[-1]["type"] == "finish"


async def test_model_settings_reach_the_model() -> None:
    script = Script([["ok"]])
    await collect(
        runner_for(script.model()),
        request([user("x")], model_settings={"temperature": 0.25, "max_tokens": 7}),
    )
    settings = script.infos[0].model_settings
    assert settings is not None
    assert settings.get("temperature") == 0.25
    assert settings.get("max_tokens") == 7


async def test_tool_output_in_the_chunk_is_plain_json() -> None:
    @dataclasses.dataclass
    class Hit:
        title: str
        score: float

    script = Script([[("call", "c1", "search", "{}")], ["ok"]])
    chunks = await collect(
        runner_for(script.model()),
        request([user("x")], tools=[tool("search", lambda a, c: [Hit("a", 0.5)])]),
    )
    output = next(c for c in chunks if c["type"] == "tool-output-available")
    assert output["output"] == [{"title": "a", "score": 0.5}]
