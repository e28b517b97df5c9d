"""The official ``openai`` client's Responses API (``responses.create`` / ``responses.stream``)
against ``/v1/responses``: text, typed events in order, a function-call round trip, stored
responses and ``previous_response_id`` chains, errors mid-stream, and a disconnect."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import openai
import pytest

from drupe.testing.fake_providers import FakeReply, RequestRecorder, fake_openai_server
from drupe.testing.recording import RecordingListener
from tests.gateway.compat.conftest import WEATHER_OPENAI, Gateway, open_gateway
from tests.gateway.compat.test_stream_lifecycle import GatewayWatch

WEATHER = {"type": "function", **WEATHER_OPENAI["function"]}  # the Responses API's flat shape


async def test_create_text_with_usage_and_echoed_settings(gateway: Gateway) -> None:
    async with gateway.openai() as client:
        reply = await client.responses.create(
            model="scripted:echo",
            input="hello there",
            instructions="Be brief.",
            metadata={"ticket": "42"},
            temperature=0.2,
            max_output_tokens=50,
        )
    assert reply.object == "response"
    assert reply.id.startswith("resp_")
    assert reply.status == "completed"
    assert reply.output_text == "You said: hello there"
    [message] = reply.output
    assert message.type == "message" and message.role == "assistant"
    assert (reply.instructions, reply.metadata) == ("Be brief.", {"ticket": "42"})
    assert (reply.temperature, reply.max_output_tokens) == (0.2, 50)
    assert reply.usage is not None
    # "Be brief." + "hello there" are 4 words in; "You said: hello there" 4 out.
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (4, 4)
    assert reply.usage.total_tokens == 8


async def test_stream_events_come_in_the_documented_order(gateway: Gateway) -> None:
    async with (
        gateway.openai() as client,
        client.responses.stream(model="scripted:lorem?words=3", input="write") as stream,
    ):
        events = [event async for event in stream]
        final = await stream.get_final_response()
    assert [e.type for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "Lorem ipsum dolor." == final.output_text
    assert events[0].response.status == "in_progress"  # type: ignore[union-attr]
    assert final.status == "completed"
    assert final.usage is not None and final.usage.output_tokens == 3


async def test_function_call_round_trip_through_previous_response_id(gateway: Gateway) -> None:
    async with gateway.openai() as client:
        async with client.responses.stream(
            model="scripted:tool", input="weather in Paris?", tools=[WEATHER]
        ) as stream:
            events = [event async for event in stream]
            first = await stream.get_final_response()
        kinds = [e.type for e in events]
        assert kinds[:3] == [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
        ]
        assert "response.function_call_arguments.delta" in kinds
        assert kinds[-3:] == [
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
        [call] = first.output
        assert call.type == "function_call"
        assert (call.name, call.arguments) == ("get_weather", '{"city": "Paris"}')
        arguments = "".join(
            e.delta for e in events if e.type == "response.function_call_arguments.delta"
        )
        assert arguments == call.arguments

        second = await client.responses.create(
            model="scripted:tool",
            previous_response_id=first.id,
            input=[
                {"type": "function_call_output", "call_id": call.call_id, "output": "18C, sunny"}
            ],
            tools=[WEATHER],
        )
    assert second.previous_response_id == first.id
    assert second.output_text == "The get_weather tool returned: 18C, sunny"


async def test_stored_responses_chain_and_are_private_to_their_key(gateway: Gateway) -> None:
    other_key, _ = await gateway.runtime.db.api_keys.create("someone else")
    async with gateway.openai() as client, gateway.openai(key=other_key) as other:
        first = await client.responses.create(
            model="scripted:echo", input="alpha beta", instructions="Not carried over."
        )
        second = await client.responses.create(
            model="scripted:echo", input="gamma", previous_response_id=first.id
        )
        fetched = await client.responses.retrieve(first.id)
        with pytest.raises(openai.NotFoundError):
            await other.responses.retrieve(first.id)
        with pytest.raises(openai.NotFoundError):
            await other.responses.create(
                model="scripted:echo", input="x", previous_response_id=first.id
            )
        unstored = await client.responses.create(model="scripted:echo", input="x", store=False)
        with pytest.raises(openai.NotFoundError):
            await client.responses.retrieve(unstored.id)
        with pytest.raises(openai.NotFoundError):
            await other.responses.delete(first.id)
        await client.responses.delete(first.id)
        with pytest.raises(openai.NotFoundError):
            await client.responses.retrieve(first.id)
    assert second.output_text == "You said: gamma"
    # The chain's history reached the model: "alpha beta" (2) + "You said: alpha beta" (4) +
    # "gamma" (1) words; the first response's instructions (3 words) were not carried over.
    assert second.usage is not None and second.usage.input_tokens == 7
    assert fetched.id == first.id
    assert fetched.output_text == first.output_text == "You said: alpha beta"


async def test_an_error_mid_stream_is_an_error_event_then_response_failed(
    gateway: Gateway,
) -> None:
    async with (
        gateway.openai() as client,
        client.responses.stream(model="scripted:error-mid?words=3", input="hi") as stream,
    ):
        events = [event async for event in stream]
        with pytest.raises(RuntimeError):
            await stream.get_final_response()  # no response.completed ever came
    kinds = [e.type for e in events]
    assert kinds[-2:] == ["error", "response.failed"]
    assert "response.completed" not in kinds
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "Lorem ipsum dolor."
    error, failed = events[-2], events[-1]
    assert "failed after the step had started" in error.message  # type: ignore[union-attr]
    assert failed.response.status == "failed"  # type: ignore[union-attr]
    assert failed.response.error is not None  # type: ignore[union-attr]
    assert [e.sequence_number for e in events] == list(range(len(events)))


async def test_a_failure_before_any_output_is_an_http_error(gateway: Gateway) -> None:
    async with gateway.openai() as client:
        with pytest.raises(openai.APIStatusError) as caught:
            await client.responses.create(model="scripted:gw-upstream-down", input="hi")
    assert caught.value.status_code == 502
    assert "upstream is down" in caught.value.message


async def test_a_client_disconnect_aborts_the_upstream(gateway: Gateway) -> None:
    manager = gateway.runtime.manager
    watch = GatewayWatch()
    remove = manager.add_status_observer(watch)
    recorder = RecordingListener("test-observer")
    with anyio.fail_after(10):
        async with (
            gateway.openai() as client,
            client.responses.stream(
                model="scripted:lorem?words=400&rate=40", input="long answer"
            ) as stream,
        ):
            async for event in stream:
                if event.type == "response.output_text.delta":
                    break  # streaming: now walk away
            await watch.started.wait()
            manager.attach(watch.conversation_id, recorder)
        terminal = await recorder.wait_done()
    remove()
    assert terminal.status == "paused"
    assert terminal.reason == "client-disconnect"
    assert (watch.conversation_id, "aborted") in watch.seen


async def test_bad_requests_are_400_with_a_message(gateway: Gateway) -> None:
    headers = {"authorization": f"Bearer {gateway.key}"}
    bodies: list[tuple[dict[str, Any], str]] = [
        ({"model": "scripted:echo"}, "'input'"),
        ({"model": "scripted:echo", "input": [{"type": "input_file"}]}, "input_file"),
        (
            {"model": "scripted:echo", "input": "x", "tools": [{"type": "web_search"}]},
            "only function tools",
        ),
        (
            {
                "model": "scripted:echo",
                "input": [{"type": "function_call_output", "call_id": "nope", "output": "1"}],
            },
            "answers no earlier function_call",
        ),
        (
            {"model": "scripted:echo", "input": "x", "tool_choice": {"type": "function"}},
            "tool_choice",
        ),
    ]
    async with httpx.AsyncClient(base_url=gateway.url, headers=headers) as http:
        for body, needle in bodies:
            response = await http.post("/v1/responses", json=body)
            assert response.status_code == 400, body
            assert needle in response.json()["error"]["message"]
        unknown = await http.post("/v1/responses", json={"model": "nowhere:x", "input": "x"})
        missing = await http.post(
            "/v1/responses",
            json={"model": "scripted:echo", "input": "x", "previous_response_id": "resp_nope"},
        )
        bare = await http.post(
            "/v1/responses",
            json={"model": "scripted:echo", "input": "x"},
            headers={"authorization": ""},
        )
    assert unknown.status_code == 404
    assert missing.status_code == 404
    assert bare.status_code == 401


async def test_items_settings_and_images_reach_the_upstream(tmp_path: Path) -> None:
    recorder = RequestRecorder()
    replies = [FakeReply(text="Seen.", output_tokens=1)]
    image = "data:image/png;base64,iVBORw0KGgo="
    async with fake_openai_server(replies, recorder=recorder) as upstream:
        config = tmp_path / "upstream.toml"
        config.write_text(
            f'[providers.fake]\ntype = "openai-compatible"\nbase_url = "{upstream}"\n'
            'models = ["fake-1"]\n'
        )
        async with open_gateway(tmp_path, config_path=config) as gw, gw.openai() as client:
            reply = await client.responses.create(
                model="fake:fake-1",
                instructions="Be terse.",
                input=[
                    {"role": "user", "content": "earlier"},
                    {"role": "assistant", "content": "noted"},
                    {
                        "role": "user",
                        "content": [
                            {"type": "input_text", "text": "what is this?"},
                            {"type": "input_image", "image_url": image, "detail": "auto"},
                        ],
                    },
                ],
                temperature=0.25,
                max_output_tokens=9,
            )
    assert reply.output_text == "Seen."
    [sent] = recorder.bodies
    assert (sent["temperature"], sent["max_tokens"]) == (0.25, 9)
    assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "user"]
    assert sent["messages"][0]["content"] == "Be terse."
    last = sent["messages"][-1]["content"]
    assert {"type": "text", "text": "what is this?"} in last
    assert any(part.get("image_url", {}).get("url") == image for part in last)


async def test_wire_names_and_not_found_codes(gateway: Gateway) -> None:
    """Issue 23.13: a non-streamed ``function_call`` item carries the wire's field names (never
    the SDK's Python ``async_``), and an unknown response id is ``not_found``, not a model's."""
    async with gateway.openai() as client:
        raw = await client.responses.with_raw_response.create(
            model="scripted:tool", input="weather in Paris?", tools=[WEATHER]
        )
        [item] = raw.http_response.json()["output"]
        assert item["type"] == "function_call" and "async_" not in item
        with pytest.raises(openai.NotFoundError) as err:
            await client.responses.retrieve("resp_nosuch")
        assert err.value.code == "not_found"
        with pytest.raises(openai.NotFoundError) as err:
            await client.chat.completions.create(
                model="scripted-nosuch:x", messages=[{"role": "user", "content": "hi"}]
            )
        assert err.value.code == "model_not_found"


async def test_input_items_list_pages_the_stored_input(gateway: Gateway) -> None:
    """Issue 23.11: ``client.responses.input_items.list`` (the official client's method)."""
    async with gateway.openai() as client:
        first = await client.responses.create(model="scripted:echo", input="alpha beta")
        second = await client.responses.create(
            model="scripted:echo", input="gamma", previous_response_id=first.id
        )
        newest_first = [item async for item in client.responses.input_items.list(second.id)]
        oldest_first = [
            item
            async for item in client.responses.input_items.list(second.id, order="asc", limit=1)
        ]
        with pytest.raises(openai.NotFoundError):
            await client.responses.input_items.list("resp_nosuch")
    # The chain: alpha beta (input), its answer (output as input), then gamma.
    assert len(newest_first) == 3
    assert [item.id for item in oldest_first] == [item.id for item in reversed(newest_first)]
    texts = [
        "".join(getattr(part, "text", "") for part in getattr(item, "content", []))
        for item in oldest_first
    ]
    assert texts[0] == "alpha beta" and texts[-1] == "gamma"
