"""The scripted model streamed directly through pydantic-ai (``request_stream``)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelConnectionError, ModelHTTPError, ModelRateLimitError
from pydantic_ai.messages import (
    FinalResultEvent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelResponseStreamEvent,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ToolCallPart,
    ToolCallPartDelta,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.tools import ToolDefinition

from drupe.agent.models.scripted import (
    Echo,
    Fail,
    FailMidStream,
    Pause,
    ScriptedModel,
    Text,
    Thinking,
    ToolCall,
    register_script,
    scripted_model,
    turn_step_index,
)

WEATHER = ToolDefinition(
    name="get_weather",
    parameters_json_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
PARAMS = ModelRequestParameters(function_tools=[WEATHER])


def user(text: str) -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(text)])


class RecordingSleep:
    """A pinned clock: records every requested sleep and returns at once."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


async def stream(
    model: ScriptedModel, messages: Sequence[ModelMessage]
) -> tuple[list[ModelResponseStreamEvent], ModelResponse]:
    async with model.request_stream(list(messages), None, PARAMS) as response:
        events = [event async for event in response]
    return events, response.get()


def kinds(events: list[ModelResponseStreamEvent]) -> list[str]:
    out = []
    for event in events:
        if isinstance(event, PartStartEvent):
            out.append(f"start:{event.part.part_kind}")
        elif isinstance(event, PartDeltaEvent):
            out.append(f"delta:{event.delta.part_delta_kind}")
        elif isinstance(event, PartEndEvent):
            out.append(f"end:{event.part.part_kind}")
        elif isinstance(event, FinalResultEvent):
            out.append("final")
    return out


async def test_echo_streams_one_delta_per_word() -> None:
    events, response = await stream(scripted_model("echo"), [user("hello brave world")])
    assert kinds(events) == ["start:text", "final", *["delta:text"] * 4, "end:text"]
    assert response.parts == [TextPart(content="You said: hello brave world")]
    deltas = [
        e.delta.content_delta
        for e in events
        if isinstance(e, PartDeltaEvent) and isinstance(e.delta, TextPartDelta)
    ]
    first = events[0]
    assert isinstance(first, PartStartEvent) and isinstance(first.part, TextPart)
    assert [first.part.content, *deltas] == ["You ", "said: ", "hello ", "brave ", "world"]
    assert response.usage.input_tokens == 3 and response.usage.output_tokens == 5
    assert response.finish_reason == "stop"


async def test_reasoning_then_text() -> None:
    events, response = await stream(scripted_model("reasoning"), [user("why")])
    order = kinds(events)
    assert order[0] == "start:thinking"
    assert order.index("end:thinking") < order.index("start:text")
    assert isinstance(response.parts[0], ThinkingPart)
    assert response.parts[1] == TextPart(content="Having thought about it: why")


async def test_tool_profile_calls_then_answers_from_the_tool_result() -> None:
    model = scripted_model('tool?tool=get_weather&args={"city": "Lyon"}')
    first = [user("weather?")]
    events, response = await stream(model, first)
    assert kinds(events) == ["start:tool-call", "delta:tool_call", "end:tool-call"]
    call = response.parts[0]
    assert isinstance(call, ToolCallPart)
    assert (call.tool_name, call.args_as_dict(), call.tool_call_id) == (
        "get_weather",
        {"city": "Lyon"},
        "call_0_0",
    )
    assert any(
        isinstance(e, PartDeltaEvent) and isinstance(e.delta, ToolCallPartDelta) for e in events
    )
    assert response.finish_reason == "tool_call"
    result = ModelRequest(
        parts=[ToolReturnPart("get_weather", "rain, 12C", tool_call_id="call_0_0")]
    )
    _, answer = await stream(model, [*first, response, result])
    assert answer.parts == [TextPart(content="The get_weather tool returned: rain, 12C")]


def test_step_index_counts_responses_since_the_last_user_prompt() -> None:
    response = ModelResponse(parts=[TextPart("x")])
    tool = ModelRequest(parts=[ToolReturnPart("t", "r", tool_call_id="c")])
    assert turn_step_index([user("a")]) == 0
    assert turn_step_index([user("a"), response, tool]) == 1
    assert turn_step_index([user("a"), response, tool, response, tool]) == 2
    assert turn_step_index([user("a"), response, tool, response, user("b")]) == 0


async def test_script_steps_and_last_step_repeats() -> None:
    model = ScriptedModel([[Text("one")], [Text("two")]])
    tool = ModelRequest(parts=[ToolReturnPart("t", "r", tool_call_id="c")])
    said = ModelResponse(parts=[TextPart("x")])
    texts = []
    for history in ([user("a")], [user("a"), said, tool], [user("a"), said, tool, said, tool]):
        _, response = await stream(model, history)
        texts.append(response.parts[0])
    assert texts == [TextPart("one"), TextPart("two"), TextPart("two")]


async def test_same_script_same_events() -> None:
    script = [
        [
            Thinking("a b", chunk_chars=2),
            Text("hello world", chunk_chars=3),
            ToolCall("get_weather", {"city": "Paris"}, tool_call_id="c1", chunk_chars=5),
        ]
    ]
    runs = [await stream(ScriptedModel(script), [user("x")]) for _ in range(2)]
    assert runs[0][0] == runs[1][0]
    assert runs[0][1].parts == runs[1][1].parts
    assert kinds(runs[0][0]).count("delta:text") == 3  # "hel", "lo ", "wor", "ld": 1 start + 3


async def test_pacing_sleeps_between_deltas_only() -> None:
    sleep = RecordingSleep()
    model = ScriptedModel(
        [[Text("a b c d"), Pause(0.5), Text("e f", chunk_chars=1)]], rate=20, sleep=sleep
    )
    _, response = await stream(model, [user("x")])
    # 4 words, then 3 one-char deltas: 7 deltas, 6 gaps of 1/20 s, plus the pause
    assert sleep.calls == [0.05] * 3 + [0.5] + [0.05] * 3
    assert response.parts == [TextPart("a b c d"), TextPart("e f")]  # one part per event
    again = RecordingSleep()
    await stream(
        ScriptedModel(
            [[Text("a b c d"), Pause(0.5), Text("e f", chunk_chars=1)]], rate=20, sleep=again
        ),
        [user("x")],
    )
    assert again.calls == sleep.calls


async def test_no_rate_never_sleeps() -> None:
    sleep = RecordingSleep()
    await stream(ScriptedModel([[Text("a b c d e f")]], sleep=sleep), [user("x")])
    assert sleep.calls == []
    slow = scripted_model("slow?words=3")
    assert slow.rate == 10.0


async def test_fail_raises_before_the_first_event() -> None:
    model = scripted_model("error")
    with pytest.raises(ModelHTTPError) as info:
        async with model.request_stream([user("x")], None, PARAMS):
            raise AssertionError("no stream may open")
    assert info.value.status_code == 500 and not info.value.in_stream


async def test_fail_first_fails_n_attempts_of_the_same_request_then_answers() -> None:
    model = scripted_model("fail-first?times=2&retry_after=3")
    history = [user("x")]
    for _ in range(2):
        with pytest.raises(ModelRateLimitError) as info:
            await stream(model, history)
        assert info.value.status_code == 429
        assert info.value.retry_after == 3
        assert (info.value.headers or {})["retry-after"] == "3"
    _, response = await stream(model, history)
    assert response.parts == [TextPart("Recovered after 2 failed attempts.")]
    # another request (other messages) has its own count
    with pytest.raises(ModelRateLimitError):
        await stream(model, [user("y")])


async def test_stacked_failures_then_success() -> None:
    model = ScriptedModel([[Fail(429, times=1), Fail(503, times=1), Text("ok")]])
    history = [user("x")]  # a retry sends the same messages again
    statuses = []
    for _ in range(2):
        with pytest.raises(ModelHTTPError) as info:
            await stream(model, history)
        statuses.append(info.value.status_code)
    assert statuses == [429, 503]
    assert (await stream(model, history))[1].parts == [TextPart("ok")]


async def test_error_mid_stream_after_content() -> None:
    model = scripted_model("error-mid?words=3")
    seen: list[ModelResponseStreamEvent] = []
    with pytest.raises(ModelHTTPError) as info:
        async with model.request_stream([user("x")], None, PARAMS) as response:
            async for event in response:
                seen.append(event)
    assert info.value.status_code == 500 and info.value.in_stream
    assert response.get().parts == [TextPart("Lorem ipsum dolor.")]
    assert kinds(seen)[:2] == ["start:text", "final"]


async def test_dropped_connection_mid_stream() -> None:
    model = ScriptedModel([[Text("partial"), FailMidStream(status_code=None)]])
    with pytest.raises(ModelConnectionError):
        await stream(model, [user("x")])


def test_fail_after_content_is_rejected() -> None:
    with pytest.raises(ValueError, match="FailMidStream"):
        ScriptedModel([[Text("x"), Fail(500)]])
    with pytest.raises(ValueError, match="at least one step"):
        ScriptedModel([])


async def test_register_script_profile() -> None:
    register_script("greeting-test", [[Echo("Hi! ")]])
    _, response = await stream(scripted_model("greeting-test"), [user("Ann")])
    assert response.parts == [TextPart("Hi! Ann")]


async def test_request_without_streaming_matches_the_stream() -> None:
    model = scripted_model("reasoning")
    _, streamed = await stream(model, [user("q")])
    direct = await model.request([user("q")], None, PARAMS)
    assert direct.parts == streamed.parts
    assert direct.usage == streamed.usage


async def test_drives_a_pydantic_ai_agent_with_a_real_tool() -> None:
    agent = Agent(scripted_model('tool?args={"city": "Oslo"}'))

    @agent.tool_plain
    def get_weather(city: str) -> str:
        return f"snow in {city}"

    result = await agent.run("weather?")
    assert result.output == "The get_weather tool returned: snow in Oslo"


def test_plan_is_lazy_and_splits_like_the_eager_plan() -> None:
    """A live answer holds a cursor, not one object per word: taking the first deltas of a
    200,000-word step allocates next to nothing (the list plan allocated ~30 MB up front); the
    deltas themselves are the words, each with the whitespace that follows it."""
    import tracemalloc

    from drupe.agent.models.script import Delta, plan_step

    words = [f"w{i}" for i in range(200_000)]
    step = (Text(" ".join(words)),)
    tracemalloc.start()
    try:
        plan = plan_step(step, [], 0)
        first = [next(plan) for _ in range(3)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024
    assert first == [Delta("text", 0, "w0 "), Delta("text", 0, "w1 "), Delta("text", 0, "w2 ")]
    rest = [d.content for d in plan if isinstance(d, Delta)]
    assert len(rest) == len(words) - 3 and rest[-1] == words[-1]
    call = list(plan_step((ToolCall("t", args='{"a": 1}', chunk_chars=4),), [], 2))
    assert [(d.content, d.tool_name, d.tool_call_id) for d in call if isinstance(d, Delta)] == [
        ('{"a"', "t", "call_2_0"),
        (": 1}", None, None),
    ]
