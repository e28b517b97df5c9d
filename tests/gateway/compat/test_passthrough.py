"""The chat-completions pass-through (``drupe.gateway.passthrough``) against the real fake
OpenAI upstream on loopback: what the upstream receives, what the client gets back, budgets,
retries, upstream errors and the idle timeout; and the agent-loop path when it is turned off.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from drupe.agent.models.providers import KEYLESS_API_KEY
from drupe.gateway.passthrough_wire import Upstream, env_proxy, upstream_body, upstream_failure
from drupe.persistence.records import KeyScopes
from drupe.testing.fake_providers import (
    FakeReply,
    FakeToolCall,
    RequestRecorder,
    fake_openai_server,
)
from tests.gateway.compat.conftest import WEATHER_OPENAI, Gateway, open_gateway

HELLO = FakeReply(text="Hello from upstream.", input_tokens=7, output_tokens=3)


@asynccontextmanager
async def gateway_over(
    tmp_path: Path,
    replies: Sequence[FakeReply],
    recorder: RequestRecorder,
    **settings: object,
) -> AsyncIterator[Gateway]:
    async with fake_openai_server(replies, recorder=recorder) as upstream:
        config = tmp_path / "upstream.toml"
        config.write_text(
            f'[providers.fake]\ntype = "openai-compatible"\nbase_url = "{upstream}"\n'
            'models = ["fake-1"]\n'
        )
        async with open_gateway(tmp_path, config_path=config, **settings) as gw:
            yield gw


def http(gw: Gateway, key: str | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"{gw.url}/v1",
        headers={"authorization": f"Bearer {key or gw.key}"},
        timeout=20,
    )


def frames(raw: str) -> list[Any]:
    """The ``data:`` payloads of an SSE body (``[DONE]`` kept as the string)."""
    out: list[Any] = []
    for event in raw.split("\n\n"):
        if event.startswith("data: "):
            data = event[len("data: ") :]
            out.append(data if data == "[DONE]" else orjson.loads(data))
    return out


def ask(stream: bool = False, **extra: Any) -> dict[str, Any]:
    return {
        "model": "fake:fake-1",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": stream,
        **extra,
    }


async def test_a_completion_is_forwarded_and_answered_under_the_clients_model_id(
    tmp_path: Path,
) -> None:
    recorder = RequestRecorder()
    async with gateway_over(tmp_path, [HELLO], recorder) as gw, http(gw) as client:
        response = await client.post(
            "/chat/completions",
            json=ask(
                messages=[
                    {"role": "developer", "content": "Be terse."},
                    {"role": "user", "content": "hi"},
                ],
                max_completion_tokens=9,
                user="u-42",  # a field Drupe does not interpret still reaches the upstream
            ),
        )
    assert response.status_code == 200
    body = response.json()
    assert body["model"] == "fake:fake-1"
    assert body["choices"][0]["message"]["content"] == "Hello from upstream."
    assert body["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    [sent] = recorder.bodies
    assert sent["model"] == "fake-1"
    assert sent["stream"] is False  # not streamed upstream when the client does not stream
    assert sent["max_tokens"] == 9 and "max_completion_tokens" not in sent
    assert [m["role"] for m in sent["messages"]] == ["system", "user"]
    assert sent["user"] == "u-42"
    [request] = recorder.requests
    assert request.headers["authorization"] == f"Bearer {KEYLESS_API_KEY}"


async def test_a_stream_is_relayed_frame_by_frame_without_the_usage_it_did_not_ask_for(
    tmp_path: Path,
) -> None:
    recorder = RequestRecorder()
    async with gateway_over(tmp_path, [HELLO], recorder) as gw, http(gw) as client:
        response = await client.post("/chat/completions", json=ask(stream=True))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = frames(response.text)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text == "Hello from upstream."
    assert {c["model"] for c in chunks} == {"fake:fake-1"}
    assert all("usage" not in c and c["choices"] for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    [sent] = recorder.bodies
    assert sent["stream_options"] == {"include_usage": True}  # asked for on Drupe's account


async def test_a_stream_that_asks_for_usage_ends_with_the_usage_chunk(tmp_path: Path) -> None:
    recorder = RequestRecorder()
    async with gateway_over(tmp_path, [HELLO], recorder) as gw, http(gw) as client:
        response = await client.post(
            "/chat/completions", json=ask(stream=True, stream_options={"include_usage": True})
        )
    *chunks, done = frames(response.text)
    assert done == "[DONE]"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["total_tokens"] == 10


async def test_tool_calls_stream_back_as_the_upstream_sent_them(tmp_path: Path) -> None:
    recorder = RequestRecorder()
    call = FakeToolCall("get_weather", {"city": "Rome"}, id="call_up", chunk_chars=5)
    async with (
        gateway_over(tmp_path, [FakeReply(tool_calls=[call])], recorder) as gw,
        http(gw) as client,
    ):
        response = await client.post(
            "/chat/completions", json=ask(stream=True, tools=[WEATHER_OPENAI])
        )
    chunks = frames(response.text)[:-1]
    calls = [
        c["choices"][0]["delta"]["tool_calls"][0]
        for c in chunks
        if c["choices"][0]["delta"].get("tool_calls")
    ]
    assert calls[0]["id"] == "call_up" and calls[0]["function"]["name"] == "get_weather"
    assert "".join(c["function"]["arguments"] for c in calls) == '{"city": "Rome"}'
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert recorder.bodies[0]["tools"] == [WEATHER_OPENAI]


@pytest.mark.parametrize("stream", [False, True])
async def test_the_tokens_the_upstream_reports_are_charged_to_the_key(
    tmp_path: Path, stream: bool
) -> None:
    recorder = RequestRecorder()
    async with gateway_over(tmp_path, [HELLO], recorder) as gw:
        key, _ = await gw.runtime.db.api_keys.create("tpd", KeyScopes(tokens_per_day=10))
        async with http(gw, key) as client:
            first = await client.post("/chat/completions", json=ask(stream=stream))
            second = await client.post("/chat/completions", json=ask(stream=stream))
    assert first.status_code == 200
    assert second.status_code == 429
    error = second.json()["error"]
    assert "token budget exhausted: 10 of 10 tokens per day" in error["message"]
    assert error["type"] == "rate_limit_error"
    assert len(recorder.bodies) == 1  # the refused request never reached the upstream


async def test_a_key_outside_its_scope_is_refused_before_the_upstream(tmp_path: Path) -> None:
    recorder = RequestRecorder()
    async with gateway_over(tmp_path, [HELLO], recorder) as gw:
        key, _ = await gw.runtime.db.api_keys.create("other", KeyScopes(models=["scripted:*"]))
        async with http(gw, key) as client:
            refused = await client.post("/chat/completions", json=ask())
        async with http(gw, "drp_not_a_key") as client:
            unknown = await client.post("/chat/completions", json=ask())
    assert refused.status_code == 403
    assert "may not use model 'fake:fake-1'" in refused.json()["error"]["message"]
    assert unknown.status_code == 401
    assert recorder.bodies == []


async def test_an_upstream_refusal_is_a_4xx_with_its_message(tmp_path: Path) -> None:
    recorder = RequestRecorder()
    replies = [FakeReply.failure(400, "messages[0] is malformed")]
    async with gateway_over(tmp_path, replies, recorder) as gw, http(gw) as client:
        plain = await client.post("/chat/completions", json=ask())
        streamed = await client.post("/chat/completions", json=ask(stream=True))
    for response in (plain, streamed):
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error"
        assert error["message"] == "the upstream answered HTTP 400: messages[0] is malformed"
    assert len(recorder.bodies) == 2  # a 400 is not retried


async def test_a_retryable_upstream_failure_is_tried_again(tmp_path: Path) -> None:
    recorder = RequestRecorder()
    replies = [FakeReply.failure(503, "overloaded", retry_after=0), HELLO]
    async with gateway_over(tmp_path, replies, recorder) as gw, http(gw) as client:
        recovered = await client.post("/chat/completions", json=ask(stream=True))
    assert recovered.status_code == 200
    assert len(recorder.bodies) == 2


async def test_a_rate_limited_upstream_is_a_429_after_the_last_try(tmp_path: Path) -> None:
    recorder = RequestRecorder()
    replies = [FakeReply.failure(429, "slow down", retry_after=0)]
    async with gateway_over(tmp_path, replies, recorder) as gw, http(gw) as client:
        limited = await client.post("/chat/completions", json=ask())
    assert limited.status_code == 429
    assert limited.json()["error"]["message"] == "the upstream answered HTTP 429: slow down"
    assert len(recorder.bodies) == 3  # RetryPolicy().attempts


async def test_an_upstream_that_goes_silent_is_a_504_before_anything_was_sent(
    tmp_path: Path,
) -> None:
    recorder = RequestRecorder()
    slow = FakeReply(text="never arrives", interval=30)
    async with (
        gateway_over(tmp_path, [slow], recorder, gateway_idle_timeout=0.5) as gw,
        http(gw) as client,
    ):
        response = await client.post("/chat/completions", json=ask(stream=True))
    assert response.status_code == 504
    error = response.json()["error"]
    assert error["code"] == "gateway_timeout"
    assert "no output for 0.5 s" in error["message"]


async def test_with_the_pass_through_off_the_agent_loop_serves_the_request(
    tmp_path: Path,
) -> None:
    recorder = RequestRecorder()
    async with (
        gateway_over(tmp_path, [HELLO], recorder, gateway_passthrough=False) as gw,
        http(gw) as client,
    ):
        response = await client.post("/chat/completions", json=ask(user="u-42"))
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "Hello from upstream."
    [sent] = recorder.bodies
    assert sent["stream"] is True  # the agent loop always streams from the upstream
    assert "user" not in sent


async def test_the_gateway_routes_come_early_but_after_the_channels_catch_all(
    tmp_path: Path,
) -> None:
    async with open_gateway(tmp_path) as gw, httpx.AsyncClient(base_url=gw.url) as client:
        channel = await client.post("/channels/v1/messages", json={})  # channel "v1", path
        pinned = await client.post("/scripted/v1/messages", json={})  # provider "scripted"
    assert channel.status_code == 404 and channel.content == b""  # the channels route's answer
    assert pinned.status_code == 401  # the gateway's: no API key
    assert pinned.json()["type"] == "error"


# --- the pure parts ------------------------------------------------------------------------

COMPATIBLE = Upstream(base_url="http://h/v1", model_name="m", api_key="k", compatible=True)
OPENAI = Upstream(base_url="http://h/v1", model_name="m", api_key="k", compatible=False)


def test_the_upstream_body_rewrites_only_what_the_upstream_needs() -> None:
    body = {
        "model": "p:m",
        "messages": [{"role": "developer", "content": "x"}, {"role": "user", "content": "y"}],
        "max_completion_tokens": 5,
        "stream": True,
        "stream_options": {"include_usage": False, "other": 1},
        "temperature": 0.2,
    }
    compatible = orjson.loads(upstream_body(body, COMPATIBLE, stream=True))
    assert compatible == {
        "model": "m",
        "messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "y"}],
        "max_tokens": 5,
        "stream": True,
        "stream_options": {"include_usage": True, "other": 1},
        "temperature": 0.2,
    }
    openai = orjson.loads(upstream_body(body, OPENAI, stream=False))
    assert openai == {**body, "model": "m"}
    assert body["model"] == "p:m"  # the client's body is not modified


@pytest.mark.parametrize(
    ("status", "expected"),
    [(429, (429, "rate_limit")), (422, (400, "invalid_request")), (401, (502, "upstream"))],
)
def test_upstream_statuses_map_as_the_agent_loop_maps_them(
    status: int, expected: tuple[int, str]
) -> None:
    failure = upstream_failure(status, b'{"error": {"message": "nope"}}')
    assert (failure.status, failure.kind) == expected
    assert failure.message == f"the upstream answered HTTP {status}: nope"
    assert upstream_failure(500, b"<html>").message == "the upstream answered HTTP 500"


def test_the_proxy_comes_from_the_environment_unless_no_proxy_exempts_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert env_proxy("http://upstream.example/v1") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    assert env_proxy("https://api.example/v1") == "http://proxy.example:3128"
    assert env_proxy("https://internal.example/v1") is None
    assert env_proxy("http://api.example/v1") is None  # no proxy for plain http
