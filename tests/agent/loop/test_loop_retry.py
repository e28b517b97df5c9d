"""Step retries: retryable failures before the first chunk are retried, with backoff, announced."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from loop_support import Script, collect, request, runner_for, types, user
from pydantic_ai.exceptions import ModelHTTPError

from drupe.agent.loop import AgentRunner
from drupe.agent.models.scripted import Fail, FailMidStream, ScriptedModel, Text
from drupe.agent.retry import FailureInfo, RetryPolicy, classify, parse_retry_after
from drupe.errors import ProviderError


class Sleeps:
    """The injected sleep: records the requested waits, never waits."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def _http(status: int, headers: dict[str, str] | None = None) -> ModelHTTPError:
    return ModelHTTPError(status, "scripted", body={"error": f"status {status}"}, headers=headers)


async def test_429_twice_then_success_emits_two_transient_retry_chunks() -> None:
    sleeps = Sleeps()
    script = Script([[_http(429)], [_http(429)], ["finally"]])
    policy = RetryPolicy(attempts=3, base_delay=0.5, max_delay=10)
    chunks = await collect(
        runner_for(script.model(), sleep=sleeps), request([user("x")], retry=policy)
    )

    retries = [c for c in chunks if c["type"] == "data-retry"]
    assert [r["data"]["attempt"] for r in retries] == [2, 3]
    assert all(r["transient"] is True for r in retries)
    assert retries[0]["data"]["maxAttempts"] == 3
    assert retries[0]["data"]["statusCode"] == 429
    assert [r["data"]["delayMs"] for r in retries] == [500, 1000]
    assert sleeps.calls == [0.5, 1.0]
    assert types(chunks)[:4] == ["start", "data-retry", "data-retry", "start-step"]
    assert chunks[-1] == {"type": "finish", "finishReason": "stop"}


async def test_retry_after_seconds_is_honoured() -> None:
    sleeps = Sleeps()
    script = Script([[_http(503, {"Retry-After": "7"})], ["ok"]])
    chunks = await collect(runner_for(script.model(), sleep=sleeps), request([user("x")]))
    assert sleeps.calls == [7.0]
    retry = next(c for c in chunks if c["type"] == "data-retry")
    assert retry["data"]["delayMs"] == 7000
    assert retry["data"]["statusCode"] == 503


async def test_retry_after_http_date_is_honoured_against_the_injected_now() -> None:
    sleeps = Sleeps()
    now = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
    script = Script([[_http(429, {"retry-after": "Sun, 29 Nov 2026 12:00:03 GMT"})], ["ok"]])
    await collect(runner_for(script.model(), sleep=sleeps, now=lambda: now), request([user("x")]))
    assert sleeps.calls == [3.0]


async def test_a_failure_after_the_first_content_chunk_is_not_retried() -> None:
    sleeps = Sleeps()
    script = Script([["partial answer", _http(500)], ["would have worked"]])
    chunks = []
    with pytest.raises(ProviderError) as caught:
        async for chunk in runner_for(script.model(), sleep=sleeps).stream(request([user("x")])):
            chunks.append(chunk)
    assert sleeps.calls == []
    assert "data-retry" not in types(chunks)
    assert caught.value.status_code == 500
    assert caught.value.retryable is True
    assert isinstance(caught.value.__cause__, ModelHTTPError)
    assert len(script.replies) == 1


async def test_a_non_retryable_400_fails_immediately() -> None:
    sleeps = Sleeps()
    script = Script([[_http(400)], ["unused"]])
    chunks = []
    with pytest.raises(ProviderError) as caught:
        async for chunk in runner_for(script.model(), sleep=sleeps).stream(request([user("x")])):
            chunks.append(chunk)
    assert caught.value.status_code == 400
    assert caught.value.retryable is False
    assert sleeps.calls == []
    assert types(chunks) == ["start"]


async def test_exhausted_attempts_raise_a_retryable_provider_error() -> None:
    sleeps = Sleeps()
    script = Script([[_http(502)], [_http(502)], [_http(502)]])
    with pytest.raises(ProviderError) as caught:
        await collect(runner_for(script.model(), sleep=sleeps), request([user("x")]))
    assert caught.value.retryable is True
    assert len(sleeps.calls) == 2


async def test_connection_reset_is_retried() -> None:
    sleeps = Sleeps()
    script = Script([[ConnectionResetError("peer reset")], ["ok"]])
    chunks = await collect(runner_for(script.model(), sleep=sleeps), request([user("x")]))
    assert len(sleeps.calls) == 1
    assert chunks[-1]["type"] == "finish"


def test_backoff_is_exponential_and_capped() -> None:
    policy = RetryPolicy(attempts=6, base_delay=1, max_delay=5)
    info = FailureInfo(retryable=True, status_code=429, retry_after=None, message="x")
    assert [policy.delay_for(n, info) for n in range(1, 7)] == [1, 2, 4, 5, 5, None]


def test_a_too_long_retry_after_makes_the_failure_final() -> None:
    policy = RetryPolicy(max_retry_after=30)
    info = classify(_http(429, {"retry-after": "120"}))
    assert info.retry_after == 120
    assert policy.delay_for(1, info) is None


def test_classification() -> None:
    assert classify(_http(429)).retryable
    assert classify(_http(529)).retryable
    assert classify(_http(408)).retryable
    assert not classify(_http(401)).retryable
    assert not classify(_http(422)).retryable
    assert classify(TimeoutError()).retryable
    assert not classify(ValueError("bug")).retryable


def test_parse_retry_after_forms() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"Retry-After": "Thu, 01 Jan 2026 00:00:10 GMT"}, now=now) == 10.0
    assert parse_retry_after({"Retry-After": "Wed, 31 Dec 2025 00:00:00 GMT"}, now=now) == 0.0
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None


async def test_the_scripted_models_failures_are_retried_like_a_providers() -> None:
    sleeps = Sleeps()
    model = ScriptedModel([[Fail(429, retry_after=3, times=2), Text("made it")]])
    chunks = await collect(AgentRunner(lambda _: model, sleep=sleeps), request([user("x")]))
    assert sleeps.calls == [3.0, 3.0]
    assert [c["data"]["statusCode"] for c in chunks if c["type"] == "data-retry"] == [429, 429]
    assert "".join(c["delta"] for c in chunks if c["type"] == "text-delta") == "made it"


async def test_a_scripted_mid_stream_failure_is_final() -> None:
    sleeps = Sleeps()
    model = ScriptedModel([[Text("half"), FailMidStream(503)]])
    with pytest.raises(ProviderError) as caught:
        await collect(AgentRunner(lambda _: model, sleep=sleeps), request([user("x")]))
    assert sleeps.calls == []
    assert caught.value.status_code == 503
