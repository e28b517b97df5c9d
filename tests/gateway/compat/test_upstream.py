"""Through a real provider path: Drupe's gateway in front of the fake OpenAI upstream.

The ``openai-compatible`` provider ``fake`` points at ``drupe.testing.fake_providers``; what the
client asked for (sampling settings, tools, history) must reach the upstream request, and what
the upstream streams must come back in the client's dialect.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from drupe.testing.fake_providers import (
    FakeReply,
    FakeToolCall,
    RequestRecorder,
    fake_openai_server,
)
from tests.gateway.compat.conftest import WEATHER_ANTHROPIC, WEATHER_OPENAI, Gateway, open_gateway


@pytest.fixture
def recorder() -> RequestRecorder:
    return RequestRecorder()


@pytest.fixture
async def upstream_gateway(tmp_path: Path, recorder: RequestRecorder) -> AsyncIterator[Gateway]:
    replies = [
        FakeReply(text="Hello from upstream.", reasoning="Thinking.", output_tokens=3),
        FakeReply(tool_calls=[FakeToolCall("get_weather", {"city": "Rome"}, id="call_up")]),
    ]
    async with fake_openai_server(replies, recorder=recorder) as upstream:
        config = tmp_path / "upstream.toml"
        config.write_text(
            f'[providers.fake]\ntype = "openai-compatible"\nbase_url = "{upstream}"\n'
            'models = ["fake-1"]\n'
        )
        async with open_gateway(tmp_path, config_path=config) as gw:
            yield gw


async def test_settings_and_history_reach_the_upstream(
    upstream_gateway: Gateway, recorder: RequestRecorder
) -> None:
    async with upstream_gateway.openai() as client:
        page = await client.models.list()
        stream = await client.chat.completions.create(
            model="fake:fake-1",
            messages=[
                {"role": "system", "content": "Be terse."},
                {"role": "user", "content": "hi"},
            ],
            max_tokens=7,
            temperature=0.25,
            stop=["END"],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [c async for c in stream]
    assert "fake:fake-1" in [m.id for m in page.data]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    reasoning = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
        for c in chunks
        if c.choices
    )
    assert text == "Hello from upstream."
    assert reasoning == "Thinking."
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 3
    [sent] = recorder.bodies
    assert sent["model"] == "fake-1"
    assert sent["max_tokens"] == 7
    assert sent["temperature"] == 0.25
    assert sent["stop"] == ["END"]
    assert [m["role"] for m in sent["messages"]] == ["system", "user"]
    assert sent["messages"][1]["content"] == "hi"


async def test_upstream_tool_calls_come_back_in_both_dialects(
    upstream_gateway: Gateway, recorder: RequestRecorder
) -> None:
    async with upstream_gateway.openai() as client:
        await client.chat.completions.create(
            model="fake:fake-1", messages=[{"role": "user", "content": "warm up"}]
        )
        reply = await client.chat.completions.create(
            model="fake:fake-1",
            messages=[{"role": "user", "content": "weather in Rome?"}],
            tools=[WEATHER_OPENAI],  # type: ignore[list-item]
        )
    assert reply.choices[0].finish_reason == "tool_calls"
    [call] = reply.choices[0].message.tool_calls or []
    assert call.id == "call_up"
    assert call.function.name == "get_weather"
    assert call.function.arguments == '{"city": "Rome"}'
    assert recorder.bodies[-1]["tools"][0]["function"]["name"] == "get_weather"

    async with upstream_gateway.anthropic() as anthropic_client:
        message = await anthropic_client.messages.create(
            model="fake:fake-1",
            max_tokens=50,
            messages=[{"role": "user", "content": "and again?"}],
            tools=[WEATHER_ANTHROPIC],  # type: ignore[list-item]
        )
    assert message.stop_reason == "tool_use"
    [block] = message.content
    assert block.type == "tool_use"
    assert block.input == {"city": "Rome"}
    assert recorder.bodies[-1]["max_tokens"] == 50
