"""Round-trips through the official openai / anthropic clients, via pydantic-ai, to the fakes.

Every model here is built by Drupe's registry from a config that points at a fake server on
loopback, so these tests cover the registry's wiring as well as the fakes' wire formats.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ToolCallPart,
    ToolCallPartDelta,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.tools import ToolDefinition

from drupe.agent.models import ModelRegistry, load_model_config
from drupe.agent.models.scripted import ScriptedModel, Text, ToolCall
from drupe.testing.fake_providers import (
    FakeReply,
    FakeToolCall,
    RequestRecorder,
    fake_anthropic_server,
    fake_openai_server,
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
ServerFactory = Callable[..., AbstractAsyncContextManager[str]]
KINDS = ["openai", "anthropic"]


def model_for(kind: str, url: str, config_file: Path) -> Model:
    """The registry's model for a provider table pointing at the fake server."""
    ptype = "openai-compatible" if kind == "openai" else "anthropic"
    config_file.write_text(
        f'[providers.fake]\ntype = "{ptype}"\nbase_url = "{url}"\n'
        'api_key_env = "FAKE_KEY"\nmodels = ["fake-1"]\n',
        encoding="utf-8",
    )
    registry = ModelRegistry(load_model_config(config_file, env={"FAKE_KEY": "sk-fake"}))
    return registry.resolve("fake:fake-1").model


def server(kind: str) -> ServerFactory:
    return fake_openai_server if kind == "openai" else fake_anthropic_server


def user(text: str) -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(text)])


async def streamed(
    model: Model, messages: list[ModelMessage], settings: Any = None
) -> tuple[list[Any], ModelResponse]:
    async with model.request_stream(messages, settings, PARAMS) as response:
        events = [event async for event in response]
    return events, response.get()


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_text_streams_as_deltas(kind: str, config_file: Path) -> None:
    recorder = RequestRecorder()
    reply = FakeReply("Hello from the fake server", input_tokens=7)
    async with server(kind)([reply], recorder=recorder) as url:
        events, response = await streamed(model_for(kind, url, config_file), [user("hi")])
    text_deltas = [
        e.delta.content_delta
        for e in events
        if isinstance(e, PartDeltaEvent) and isinstance(e.delta, TextPartDelta)
    ]
    assert len(text_deltas) >= 3
    texts = [p.content for p in response.parts if isinstance(p, TextPart)]
    assert texts == ["Hello from the fake server"]
    assert response.usage.input_tokens == 7 and response.usage.output_tokens == 5
    (body,) = recorder.bodies
    assert body["model"] == "fake-1" and body["stream"] is True
    assert "sk-fake" in (
        recorder.requests[0].headers.get("authorization", "")
        + recorder.requests[0].headers.get("x-api-key", "")
    )


async def test_tool_call_with_streamed_arguments(kind: str, config_file: Path) -> None:
    recorder = RequestRecorder()
    call = FakeToolCall("get_weather", {"city": "Paris"}, id="call_abc", chunk_chars=4)
    replies = [FakeReply(tool_calls=[call], reasoning="I should look it up"), FakeReply("Sunny.")]
    async with server(kind)(replies, recorder=recorder) as url:
        model = model_for(kind, url, config_file)
        events, response = await streamed(model, [user("weather in Paris?")])
        arg_deltas = [
            e
            for e in events
            if isinstance(e, PartDeltaEvent) and isinstance(e.delta, ToolCallPartDelta)
        ]
        assert len(arg_deltas) >= 3
        calls = [p for p in response.parts if isinstance(p, ToolCallPart)]
        assert [(c.tool_name, c.args_as_dict(), c.tool_call_id) for c in calls] == [
            ("get_weather", {"city": "Paris"}, "call_abc")
        ]
        thinking = [p.content for p in response.parts if isinstance(p, ThinkingPart)]
        assert thinking == ["I should look it up"]
        result = ModelRequest(
            parts=[ToolReturnPart("get_weather", "sunny, 25C", tool_call_id="call_abc")]
        )
        _, answer = await streamed(model, [user("weather in Paris?"), response, result])
    assert [p.content for p in answer.parts if isinstance(p, TextPart)] == ["Sunny."]
    first, second = recorder.bodies
    tool_names = [t["function"]["name"] if kind == "openai" else t["name"] for t in first["tools"]]
    assert tool_names == ["get_weather"]
    sent = second["messages"]
    if kind == "openai":
        assert sent[-1] == {"role": "tool", "tool_call_id": "call_abc", "content": "sunny, 25C"}
    else:
        block = sent[-1]["content"][0]
        assert block["type"] == "tool_result" and block["tool_use_id"] == "call_abc"


async def test_429_with_retry_after_is_a_model_http_error(kind: str, config_file: Path) -> None:
    recorder = RequestRecorder()
    replies = [
        FakeReply.failure(429, "slow down", retry_after=2),
        FakeReply.failure(429, "slow down", retry_after=2),
        FakeReply("finally"),
    ]
    async with server(kind)(replies, recorder=recorder) as url:
        model = model_for(kind, url, config_file)
        history: list[ModelMessage] = [user("hi")]
        for _ in range(2):
            with pytest.raises(ModelHTTPError) as info:
                await streamed(model, history)
            assert info.value.status_code == 429
            assert info.value.retry_after == 2
            assert (info.value.headers or {}).get("retry-after") == "2"
        _, response = await streamed(model, history)
    assert [p.content for p in response.parts if isinstance(p, TextPart)] == ["finally"]
    # SDK retries are off: exactly one HTTP request per attempt, so Drupe's loop owns retrying
    assert len(recorder.bodies) == 3


async def test_non_streamed_request(kind: str, config_file: Path) -> None:
    call = FakeToolCall("get_weather", {"city": "Rome"})
    async with server(kind)([FakeReply("Let me check.", tool_calls=[call])]) as url:
        response = await model_for(kind, url, config_file).request([user("hi")], None, PARAMS)
    assert [p.part_kind for p in response.parts] == ["text", "tool-call"]
    assert response.usage.input_tokens == 10


async def test_non_openai_server_gets_max_tokens(config_file: Path) -> None:
    recorder = RequestRecorder()
    async with fake_openai_server([FakeReply("ok")], recorder=recorder) as url:
        await streamed(model_for("openai", url, config_file), [user("hi")], {"max_tokens": 32})
    (body,) = recorder.bodies
    assert body["max_tokens"] == 32 and "max_completion_tokens" not in body
    assert body["stream_options"] == {"include_usage": True}


async def test_models_endpoint_through_the_openai_client() -> None:
    recorder = RequestRecorder()
    async with fake_openai_server([FakeReply("x")], recorder=recorder) as url:
        client = AsyncOpenAI(base_url=url, api_key="k", max_retries=0)
        async with client:
            page = await client.models.list()
    assert [m.id for m in page.data] == ["fake-1"]
    assert recorder.requests[0].path == "/v1/models"


async def test_fake_and_scripted_models_build_the_same_response(
    kind: str, config_file: Path
) -> None:
    """The same logical answer through a real client and through the scripted model."""
    args = {"city": "Paris"}
    fake = FakeReply("Checking.", tool_calls=[FakeToolCall("get_weather", args, id="c1")])
    scripted = ScriptedModel([[Text("Checking."), ToolCall("get_weather", args, "c1")]])
    async with server(kind)([fake]) as url:
        _, via_client = await streamed(model_for(kind, url, config_file), [user("hi")])
    _, via_script = await streamed(scripted, [user("hi")])

    def shape(response: ModelResponse) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        for part in response.parts:
            if isinstance(part, TextPart):
                out.append(("text", part.content))
            elif isinstance(part, ToolCallPart):
                out.append(("tool", (part.tool_name, part.args_as_dict(), part.tool_call_id)))
        return out

    assert shape(via_client) == shape(via_script)


async def test_reply_factory_sees_the_request_body() -> None:
    def answer(body: dict[str, Any]) -> FakeReply:
        return FakeReply(f"{len(body['messages'])} messages")

    async with fake_openai_server(answer) as url:
        client = AsyncOpenAI(base_url=url, api_key="k", max_retries=0)
        async with client:
            completion = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "a"}]
            )
    assert completion.choices[0].message.content == "1 messages"


async def test_errors_raised_in_the_server_block_surface_bare(config_file: Path) -> None:
    with pytest.raises(ModelHTTPError) as info:
        async with fake_openai_server([FakeReply.failure(503, "down")]) as url:
            await streamed(model_for("openai", url, config_file), [user("hi")])
    assert info.value.status_code == 503
