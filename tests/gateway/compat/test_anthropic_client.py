"""The official ``anthropic`` client against ``/v1/messages``."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import pytest

from tests.gateway.compat.conftest import WEATHER_ANTHROPIC, Gateway


async def test_non_streaming_text_with_usage(gateway: Gateway) -> None:
    async with gateway.anthropic() as client:
        message = await client.messages.create(
            model="scripted:echo",
            max_tokens=100,
            system="Be brief.",
            messages=[{"role": "user", "content": "hello there"}],
        )
    assert message.type == "message"
    assert message.role == "assistant"
    assert message.model == "scripted:echo"
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == "You said: hello there"  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens == 4
    assert message.usage.input_tokens == 4


async def test_streaming_named_events_end_with_message_stop(gateway: Gateway) -> None:
    headers = {"x-api-key": gateway.key, "anthropic-version": "2023-06-01"}
    body = {
        "model": "scripted:lorem?words=5",
        "max_tokens": 50,
        "stream": True,
        "messages": [{"role": "user", "content": "write"}],
    }
    async with (
        httpx.AsyncClient(base_url=gateway.url, headers=headers) as http,
        http.stream("POST", "/v1/messages", json=body) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        raw = (await response.aread()).decode()
    events = [line[len("event: ") :] for line in raw.splitlines() if line.startswith("event: ")]
    assert events[0] == "message_start"
    assert events[1] == "content_block_start"
    assert events.count("content_block_delta") == 5
    assert events[-3:] == ["content_block_stop", "message_delta", "message_stop"]


async def test_streaming_text_through_the_sdk_helper(gateway: Gateway) -> None:
    async with (
        gateway.anthropic() as client,
        client.messages.stream(
            model="scripted:lorem?words=8",
            max_tokens=100,
            messages=[{"role": "user", "content": "write"}],
        ) as stream,
    ):
        pieces = [text async for text in stream.text_stream]
        message = await stream.get_final_message()
    assert len(pieces) == 8
    assert message.content[0].text == "".join(pieces)  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens == 8
    assert message.usage.input_tokens == 1


async def test_thinking_blocks_stream_and_return(gateway: Gateway) -> None:
    request: dict[str, Any] = {
        "model": "scripted:reasoning?thinking=Consider+it.",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "why"}],
    }
    async with gateway.anthropic() as client:
        async with client.messages.stream(**request) as stream:
            kinds = [event.type async for event in stream]
            streamed = await stream.get_final_message()
        plain = await client.messages.create(**request)
    assert "thinking" in kinds
    for message in (streamed, plain):
        assert [block.type for block in message.content] == ["thinking", "text"]
        assert message.content[0].thinking == "Consider it."  # type: ignore[union-attr]
        assert message.content[1].text == "Having thought about it: why"  # type: ignore[union-attr]


async def test_tool_use_then_the_client_answers_it(gateway: Gateway) -> None:
    question: dict[str, Any] = {"role": "user", "content": "weather in Paris?"}
    async with gateway.anthropic() as client:
        async with client.messages.stream(
            model="scripted:tool",
            max_tokens=100,
            messages=[question],
            tools=[WEATHER_ANTHROPIC],  # type: ignore[list-item]
        ) as stream:
            partials = [
                event.partial_json
                async for event in stream
                if event.type == "input_json"  # the SDK's parsed input_json_delta
            ]
            message = await stream.get_final_message()
        assert message.stop_reason == "tool_use"
        [tool_use] = message.content
        assert tool_use.type == "tool_use"
        assert tool_use.name == "get_weather"
        assert tool_use.input == {"city": "Paris"}
        assert "".join(partials) == '{"city": "Paris"}'

        answer = await client.messages.create(
            model="scripted:tool",
            max_tokens=100,
            tools=[WEATHER_ANTHROPIC],  # type: ignore[list-item]
            messages=[
                question,
                {"role": "assistant", "content": [tool_use.model_dump()]},  # type: ignore[list-item]
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": tool_use.id, "content": "18C"}
                    ],
                },
            ],
        )
    assert answer.stop_reason == "end_turn"
    assert answer.content[0].text == "The get_weather tool returned: 18C"  # type: ignore[union-attr]


async def test_keys_by_x_api_key_or_bearer_and_401_shape(gateway: Gateway) -> None:
    body = {
        "model": "scripted:echo",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
    }
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        bearer = await http.post(
            "/v1/messages", json=body, headers={"authorization": f"Bearer {gateway.key}"}
        )
        missing = await http.post("/v1/messages", json=body)
    assert bearer.status_code == 200
    assert missing.status_code == 401
    assert missing.json() == {
        "type": "error",
        "error": {
            "type": "authentication_error",
            "message": "missing API key: send it as Authorization: Bearer <key> or x-api-key",
        },
    }
    async with gateway.anthropic(key="drp_wrong-wrong-wrong-wrong-wrong-00") as client:
        with pytest.raises(anthropic.AuthenticationError) as caught:
            await client.messages.create(
                model="scripted:echo", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )
    assert caught.value.status_code == 401


async def test_unknown_model_and_bad_body(gateway: Gateway) -> None:
    async with gateway.anthropic() as client:
        with pytest.raises(anthropic.NotFoundError) as unknown:
            await client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=10,
                messages=[{"role": "user", "content": "hi"}],
            )
        with pytest.raises(anthropic.BadRequestError) as bad:
            await client.messages.create(
                model="scripted:echo",
                max_tokens=10,
                messages=[{"role": "system", "content": "hi"}],  # type: ignore[list-item]
            )
    assert unknown.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
    assert "provider:model" in unknown.value.message
    assert bad.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]


async def test_failures_before_and_after_commit(gateway: Gateway) -> None:
    async with gateway.anthropic() as client:
        with pytest.raises(anthropic.APIStatusError) as before:
            await client.messages.create(
                model="scripted:gw-upstream-down",
                max_tokens=10,
                stream=True,
                messages=[{"role": "user", "content": "hi"}],
            )
        texts: list[str] = []
        with pytest.raises(anthropic.APIStatusError) as after:
            async with client.messages.stream(
                model="scripted:error-mid?words=3",
                max_tokens=10,
                messages=[{"role": "user", "content": "hi"}],
            ) as stream:
                async for text in stream.text_stream:
                    texts.append(text)
    assert before.value.status_code == 502
    assert before.value.body["error"]["type"] == "api_error"  # type: ignore[index]
    assert "".join(texts) == "Lorem ipsum dolor."
    assert after.value.body["error"]["type"] == "api_error"  # type: ignore[index]


async def test_models_in_the_anthropic_shape(gateway: Gateway) -> None:
    async with gateway.anthropic() as client:
        page = await client.models.list()
        one = await client.models.retrieve("scripted:echo")
        with pytest.raises(anthropic.NotFoundError):
            await client.models.retrieve("nowhere:x")
    assert "scripted:echo" in [model.id for model in page.data]
    assert one.type == "model"
    assert one.display_name == "Scripted echo (test model)"


async def test_count_tokens_is_exact_for_a_scripted_model(gateway: Gateway) -> None:
    """Issue 23.11: ``messages.count_tokens`` equals the input usage the same request reports;
    a model without a count is a 400 saying so; an unknown model is a 404."""
    request: dict[str, Any] = {
        "model": "scripted:echo",
        "system": "You are terse and kind.",
        "messages": [
            {"role": "user", "content": "first question here"},
            {"role": "assistant", "content": "an answer of six words total"},
            {"role": "user", "content": "and a follow up"},
        ],
    }
    async with gateway.anthropic() as client:
        counted = await client.messages.count_tokens(**request)
        answered = await client.messages.create(max_tokens=64, **request)
        with pytest.raises(anthropic.NotFoundError):
            await client.messages.count_tokens(
                model="nowhere:x", messages=[{"role": "user", "content": "hi"}]
            )
    assert counted.input_tokens == answered.usage.input_tokens == 5 + 3 + 6 + 4
