"""A tool turn through the real OpenAI and Anthropic clients equals the same turn scripted.

The loop drives pydantic-ai models built by Drupe's registry against the loopback fakes of
``drupe.testing.fake_providers`` (real ``openai`` / ``anthropic`` SDKs, real SSE), and the
scripted model; the accumulated UI messages must be the same, and the second request must
carry the tool result in each provider's wire format.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from loop_support import collect, request, tool, user

from drupe.agent.loop import AgentRunner
from drupe.agent.models import ModelRegistry, load_model_config
from drupe.agent.models.scripted import ScriptedModel, Text, ToolCall
from drupe.chunks.accumulate import accumulate
from drupe.chunks.types import UIMessage
from drupe.testing.fake_providers import (
    FakeReply,
    FakeToolCall,
    RequestRecorder,
    fake_anthropic_server,
    fake_openai_server,
)

ARGS = {"city": "Paris"}
ServerFactory = Callable[..., AbstractAsyncContextManager[str]]


def _registry_model(kind: str, url: str, config_file: Path) -> Any:
    ptype = "openai-compatible" if kind == "openai" else "anthropic"
    config_file.write_text(
        f'[providers.fake]\ntype = "{ptype}"\nbase_url = "{url}"\n'
        'api_key_env = "FAKE_KEY"\nmodels = ["fake-1"]\n',
        encoding="utf-8",
    )
    registry = ModelRegistry(load_model_config(config_file, env={"FAKE_KEY": "sk-fake"}))
    return registry.resolve("fake:fake-1").model


def _weather_request() -> Any:
    weather = tool("get_weather", lambda args, ctx: {"city": args["city"], "sky": "sunny"})
    return request([user("weather in Paris?")], tools=[weather], system="be brief")


def _shape(message: UIMessage) -> dict[str, Any]:
    """The persisted message without usage metadata (token counting differs per provider)."""
    return {"id": message["id"], "role": message["role"], "parts": message["parts"]}


async def _scripted_message() -> UIMessage:
    model = ScriptedModel(
        [
            [Text("Checking."), ToolCall("get_weather", ARGS, "call_1")],
            [Text("It is sunny in Paris.")],
        ]
    )
    chunks = await collect(AgentRunner(lambda _: model), _weather_request())
    return accumulate(chunks)


@pytest.mark.parametrize(
    ("kind", "server"),
    [("openai", fake_openai_server), ("anthropic", fake_anthropic_server)],
)
async def test_tool_turn_through_real_clients_matches_the_scripted_turn(
    kind: str, server: ServerFactory, tmp_path: Path
) -> None:
    recorder = RequestRecorder()
    replies = [
        FakeReply("Checking.", tool_calls=[FakeToolCall("get_weather", ARGS, id="call_1")]),
        FakeReply("It is sunny in Paris."),
    ]
    async with server(replies, recorder=recorder) as url:
        model = _registry_model(kind, url, tmp_path / "config.toml")
        chunks = await collect(AgentRunner(lambda _: model), _weather_request())

    via_client = accumulate(chunks)
    assert _shape(via_client) == _shape(await _scripted_message())
    tool_part = next(p for p in via_client["parts"] if p["type"] == "tool-get_weather")
    assert tool_part["state"] == "output-available"
    assert tool_part["output"] == {"city": "Paris", "sky": "sunny"}

    first, second = recorder.bodies
    assert "be brief" in str(first)  # the system prompt reached the wire
    assert [t.get("name") or t["function"]["name"] for t in first["tools"]] == ["get_weather"]
    assert '"sky"' in str(second["messages"]) or "'sky'" in str(second["messages"])
    usage = [c for c in chunks if c["type"] == "message-metadata"][-1]["messageMetadata"]
    assert usage["usage"]["inputTokens"] == 20  # 10 per request, summed over the two steps
