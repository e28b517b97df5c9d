"""The official ``openai`` client against ``/v1/chat/completions`` and ``/v1/models``."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.gateway.compat.conftest import WEATHER_OPENAI, Gateway


async def test_non_streaming_text_with_usage(gateway: Gateway) -> None:
    async with gateway.openai() as client:
        reply = await client.chat.completions.create(
            model="scripted:echo",
            messages=[
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "hello there"},
            ],
            max_tokens=50,
            temperature=0.2,
        )
    assert reply.object == "chat.completion"
    assert reply.model == "scripted:echo"
    choice = reply.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == "You said: hello there"
    assert choice.finish_reason == "stop"
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 4
    assert reply.usage.prompt_tokens == 4  # "Be brief." + "hello there", in words
    assert reply.usage.total_tokens == 8


async def test_streaming_text_ends_with_usage_and_done(gateway: Gateway) -> None:
    async with gateway.openai() as client:
        stream = await client.chat.completions.create(
            model="scripted:lorem?words=12",
            messages=[{"role": "user", "content": "write"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    content = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert len(content) == 12
    assert "".join(content).startswith("Lorem ipsum dolor")
    assert chunks[0].choices[0].delta.role == "assistant"
    finishes = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finishes == ["stop"]
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 12


async def test_streaming_reasoning_arrives_as_reasoning_content(gateway: Gateway) -> None:
    async with gateway.openai() as client:
        stream = await client.chat.completions.create(
            model="scripted:reasoning?thinking=Think+it+through.",
            messages=[{"role": "user", "content": "why"}],
            stream=True,
        )
        deltas = [c.choices[0].delta async for c in stream if c.choices]
        reply = await client.chat.completions.create(
            model="scripted:reasoning?thinking=Think+it+through.",
            messages=[{"role": "user", "content": "why"}],
        )
    reasoning = "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas)
    text = "".join(d.content or "" for d in deltas)
    assert reasoning == "Think it through."
    assert text == "Having thought about it: why"
    message_extra: dict[str, Any] = reply.choices[0].message.model_extra or {}
    assert message_extra["reasoning_content"] == "Think it through."
    assert reply.choices[0].message.content == "Having thought about it: why"


async def test_streaming_tool_call_then_the_client_answers_it(gateway: Gateway) -> None:
    async with gateway.openai() as client:
        stream = await client.chat.completions.create(
            model="scripted:tool",
            messages=[{"role": "user", "content": "weather in Paris?"}],
            tools=[WEATHER_OPENAI],  # type: ignore[list-item]
            stream=True,
        )
        chunks = [c async for c in stream]
        calls: dict[int, dict[str, str]] = {}
        for chunk in chunks:
            for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] += call.id or ""
                entry["name"] += (call.function.name or "") if call.function else ""
                entry["arguments"] += (call.function.arguments or "") if call.function else ""
        finish = [
            c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
        ]
        assert finish == ["tool_calls"]
        assert list(calls) == [0]
        call = calls[0]
        assert call["name"] == "get_weather"
        assert call["arguments"] == '{"city": "Paris"}'

        followup = await client.chat.completions.create(
            model="scripted:tool",
            messages=[
                {"role": "user", "content": "weather in Paris?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": call["arguments"]},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": call["id"], "content": "18C and sunny"},
            ],
            tools=[WEATHER_OPENAI],  # type: ignore[list-item]
        )
    assert followup.choices[0].finish_reason == "stop"
    assert followup.choices[0].message.content == "The get_weather tool returned: 18C and sunny"


async def test_non_streaming_tool_call(gateway: Gateway) -> None:
    async with gateway.openai() as client:
        reply = await client.chat.completions.create(
            model="scripted:tool?args=%7B%22city%22%3A%22Oslo%22%7D",
            messages=[{"role": "user", "content": "weather?"}],
            tools=[WEATHER_OPENAI],  # type: ignore[list-item]
        )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    [call] = choice.message.tool_calls
    assert call.type == "function"
    assert call.function.name == "get_weather"
    assert call.function.arguments == '{"city": "Oslo"}'


async def test_models_lists_registry_ids(gateway: Gateway) -> None:
    async with gateway.openai() as client:
        page = await client.models.list()
        one = await client.models.retrieve("scripted:echo")
        with pytest.raises(openai.NotFoundError):
            await client.models.retrieve("nowhere:x")
    ids = [model.id for model in page.data]
    assert "scripted:echo" in ids
    assert all(":" in model_id for model_id in ids)
    assert (one.id, one.owned_by) == ("scripted:echo", "scripted")
    # Issue 23.10/23.13: only what can answer, and every scripted profile.
    for profile in ("lorem", "tool", "reasoning", "error", "error-mid", "fail-first", "slow"):
        assert f"scripted:{profile}" in ids
    picker = {m.id: m for m in gateway.runtime.models.list_models()}
    dead = [model_id for model_id, info in picker.items() if not info.available]
    assert dead, "the registry lists providers without a key (the picker says why)"
    assert all(picker[model_id].note for model_id in dead)
    assert not set(dead) & set(ids)


async def test_missing_or_bad_key_is_401_in_openai_shape(gateway: Gateway) -> None:
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        bare = await http.post(
            "/v1/chat/completions",
            json={"model": "scripted:echo", "messages": [{"role": "user", "content": "hi"}]},
        )
        models = await http.get("/v1/models")
    assert bare.status_code == 401
    assert bare.json()["error"]["code"] == "invalid_api_key"
    assert "missing API key" in bare.json()["error"]["message"]
    assert models.status_code == 401
    async with gateway.openai(key="drp_not-a-real-key-at-all-000000000") as client:
        with pytest.raises(openai.AuthenticationError) as caught:
            await client.chat.completions.create(
                model="scripted:echo", messages=[{"role": "user", "content": "hi"}]
            )
    assert caught.value.status_code == 401
    assert "drp_not" not in str(caught.value)


async def test_revoked_key_is_refused(gateway: Gateway) -> None:
    key, record = await gateway.runtime.db.api_keys.create("short-lived")
    await gateway.runtime.db.api_keys.revoke(record.id)
    async with gateway.openai(key=key) as client:
        with pytest.raises(openai.AuthenticationError):
            await client.models.list()


async def test_unknown_model_is_404_before_anything_starts(gateway: Gateway) -> None:
    before = gateway.runtime.manager.statistics()["outcomes"]
    async with gateway.openai() as client:
        with pytest.raises(openai.NotFoundError) as unknown:
            await client.chat.completions.create(
                model="nowhere:model-x", messages=[{"role": "user", "content": "hi"}]
            )
        with pytest.raises(openai.NotFoundError) as bare_name:
            await client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True
            )
    assert "unknown model provider 'nowhere'" in unknown.value.message
    assert "provider:model" in bare_name.value.message
    assert gateway.runtime.manager.statistics()["outcomes"] == before


async def test_malformed_requests_are_400(gateway: Gateway) -> None:
    headers = {"authorization": f"Bearer {gateway.key}"}
    async with httpx.AsyncClient(base_url=gateway.url, headers=headers) as http:
        not_json = await http.post("/v1/chat/completions", content=b"{nope")
        no_messages = await http.post("/v1/chat/completions", json={"model": "scripted:echo"})
        orphan_tool = await http.post(
            "/v1/chat/completions",
            json={
                "model": "scripted:echo",
                "messages": [{"role": "tool", "tool_call_id": "x", "content": "1"}],
            },
        )
    for response in (not_json, no_messages, orphan_tool):
        assert response.status_code == 400
        assert response.json()["error"]["type"] == "invalid_request_error"
    assert "messages" in no_messages.json()["error"]["message"]


async def test_upstream_failure_before_commit_is_502(gateway: Gateway) -> None:
    async with gateway.openai() as client:
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(
                model="scripted:gw-upstream-down",
                messages=[{"role": "user", "content": "hi"}],
                stream=True,
            )
    assert caught.value.status_code == 502
    assert "upstream is down" in caught.value.message


async def test_failure_after_commit_is_an_error_frame(gateway: Gateway) -> None:
    text: list[str] = []
    async with gateway.openai() as client:
        stream = await client.chat.completions.create(
            model="scripted:error-mid?words=3",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
        )
        with pytest.raises(openai.APIError) as caught:
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    text.append(chunk.choices[0].delta.content)
    assert "".join(text) == "Lorem ipsum dolor."
    assert caught.value.body is not None
    assert "failed after the step had started" in caught.value.message
