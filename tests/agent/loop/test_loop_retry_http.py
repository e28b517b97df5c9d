"""Retry through the real OpenAI client against a loopback chat-completions server.

The server answers 429 (with ``Retry-After``) twice, then streams a reply. This checks where the
status and the header surface through pydantic-ai and the openai SDK (``ModelHTTPError.headers``)
and that the SDK's own retries are off (``max_retries=0``), so the loop's policy is the only one.
"""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
import uvicorn
from loop_support import collect, request, types, user
from openai import AsyncOpenAI
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from drupe.agent.loop import AgentRunner
from drupe.agent.retry import RetryPolicy
from drupe.errors import ProviderError


class FakeChatCompletions:
    """ASGI app: ``rate_limited`` 429 answers, then one streamed ``hello`` completion."""

    def __init__(self, rate_limited: int, retry_after: str) -> None:
        self.rate_limited = rate_limited
        self.retry_after = retry_after
        self.requests = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                pass
            return
        body = b""
        while True:
            event = await receive()
            body += event.get("body", b"")
            if not event.get("more_body"):
                break
        self.requests += 1
        if self.requests <= self.rate_limited:
            payload = json.dumps({"error": {"message": "slow down", "type": "rate_limit"}})
            await send(
                {
                    "type": "http.response.start",
                    "status": 429,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"retry-after", self.retry_after.encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": payload.encode()})
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        for event_body in _completion_events("hello"):
            await send({"type": "http.response.body", "body": event_body, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


def _completion_events(text: str) -> list[bytes]:
    base = {"id": "cmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "fake-1"}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {
            **base,
            "choices": [],
            "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13},
        },
    ]
    return [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]


@pytest.fixture
async def fake_server(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[str, FakeChatCompletions]]:
    app = FakeChatCompletions(**request.param)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)  # connections queue from here on: no waiting for the server to start
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        yield f"http://127.0.0.1:{port}/v1", app
        server.should_exit = True
    sock.close()


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


@asynccontextmanager
async def _runner(base_url: str, sleeps: Sleeps) -> AsyncIterator[AgentRunner]:
    async with AsyncOpenAI(base_url=base_url, api_key="test-key", max_retries=0) as client:
        model = OpenAIChatModel("fake-1", provider=OpenAIProvider(openai_client=client))
        yield AgentRunner(lambda _: model, sleep=sleeps)


@pytest.mark.parametrize("fake_server", [{"rate_limited": 2, "retry_after": "2"}], indirect=True)
async def test_429_twice_then_200_over_http_honours_retry_after(
    fake_server: tuple[str, FakeChatCompletions],
) -> None:
    base_url, app = fake_server
    sleeps = Sleeps()
    async with _runner(base_url, sleeps) as runner:
        chunks = await collect(runner, request([user("hi")]))

    assert app.requests == 3
    assert sleeps.calls == [2.0, 2.0]
    retries = [c["data"] for c in chunks if c["type"] == "data-retry"]
    assert [(r["attempt"], r["statusCode"], r["delayMs"]) for r in retries] == [
        (2, 429, 2000),
        (3, 429, 2000),
    ]
    assert "".join(c["delta"] for c in chunks if c["type"] == "text-delta") == "hello"
    usage = next(c for c in chunks if c["type"] == "message-metadata")["messageMetadata"]
    assert usage["usage"] == {"inputTokens": 11, "outputTokens": 2, "totalTokens": 13}
    assert types(chunks)[-1] == "finish"


@pytest.mark.parametrize("fake_server", [{"rate_limited": 5, "retry_after": "1"}], indirect=True)
async def test_rate_limited_past_the_attempts_is_a_retryable_provider_error(
    fake_server: tuple[str, FakeChatCompletions],
) -> None:
    base_url, app = fake_server
    sleeps = Sleeps()
    async with _runner(base_url, sleeps) as runner:
        with pytest.raises(ProviderError) as caught:
            await collect(runner, request([user("hi")], retry=RetryPolicy(attempts=2)))
    assert app.requests == 2
    assert caught.value.status_code == 429
    assert caught.value.retryable is True
