"""Per-key scopes and budgets: keys made by ``drupe keys create --models/--agents/--rpm/--tpd``,
enforced on every dialect (403 outside the scope, 429 with ``Retry-After`` over budget)."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

import anthropic
import anyio
import httpx
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from drupe.cli.main import app
from drupe.gateway.limits import KeyLimiter, check_agent_scope, check_scope
from drupe.persistence.records import ApiKeyRecord
from tests.gateway.compat.conftest import open_gateway

runner = CliRunner()
DAY = 86_400.0


async def cli_key(tmp_path: Path, *options: str) -> str:
    result = await anyio.to_thread.run_sync(
        runner.invoke, app, ["keys", "create", "scoped", *options, "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert "scope:" in result.output
    key: str = result.output.strip().splitlines()[-1]
    return key


def chat(model: str, text: str = "hello there") -> dict[str, object]:
    return {"model": model, "messages": [{"role": "user", "content": text}]}


async def test_a_key_limited_to_models_gets_403_elsewhere(tmp_path: Path) -> None:
    key = await cli_key(tmp_path, "--models", "scripted:echo,fake:*")
    async with open_gateway(tmp_path) as gw, gw.openai(key=key) as client:
        allowed = await client.chat.completions.create(**chat("scripted:echo"))  # type: ignore[call-overload]
        listed = [model.id async for model in client.models.list()]
        with pytest.raises(openai.PermissionDeniedError):
            await client.models.retrieve("scripted:lorem")
        with pytest.raises(openai.PermissionDeniedError) as chat_refused:
            await client.chat.completions.create(**chat("scripted:lorem"))  # type: ignore[call-overload]
        with pytest.raises(openai.PermissionDeniedError):
            await client.responses.create(model="scripted:lorem", input="x")
        async with anthropic.AsyncAnthropic(
            base_url=f"{gw.url}/scripted", api_key=key, max_retries=0
        ) as claude:
            pinned_ok = await claude.messages.create(
                model="echo", max_tokens=5, messages=[{"role": "user", "content": "x"}]
            )
            with pytest.raises(anthropic.PermissionDeniedError) as pinned:
                await claude.messages.create(
                    model="lorem", max_tokens=5, messages=[{"role": "user", "content": "x"}]
                )
    assert allowed.choices[0].message.content == "You said: hello there"
    assert listed == ["scripted:echo"]  # only what the key may use (no fake:* model here)
    assert chat_refused.value.status_code == 403
    assert "may not use model 'scripted:lorem'" in chat_refused.value.message
    assert chat_refused.value.body["type"] == "permission_error"  # type: ignore[index]
    assert pinned_ok.content[0].text == "You said: x"  # type: ignore[union-attr]
    assert pinned.value.status_code == 403
    assert pinned.value.body["error"]["type"] == "permission_error"  # type: ignore[index]


async def test_requests_per_minute_over_budget_is_429_with_retry_after(tmp_path: Path) -> None:
    key = await cli_key(tmp_path, "--rpm", "2")
    headers = {"authorization": f"Bearer {key}"}
    async with (
        open_gateway(tmp_path) as gw,
        httpx.AsyncClient(base_url=gw.url, headers=headers) as http,
    ):
        first = await http.post("/v1/chat/completions", json=chat("scripted:echo"))
        second = await http.post("/v1/responses", json={"model": "scripted:echo", "input": "x"})
        third = await http.post("/v1/chat/completions", json=chat("scripted:echo"))
        async with gw.openai(key=key) as client:
            with pytest.raises(openai.RateLimitError) as caught:
                await client.responses.create(model="scripted:echo", input="x")
        unlimited = await http.post(
            "/v1/chat/completions",
            json=chat("scripted:echo"),
            headers={"authorization": f"Bearer {gw.key}"},
        )
    assert (first.status_code, second.status_code, unlimited.status_code) == (200, 200, 200)
    assert third.status_code == 429
    assert 1 <= int(third.headers["retry-after"]) <= 60
    error = third.json()["error"]
    assert error["type"] == "rate_limit_error" and error["code"] == "rate_limit_exceeded"
    assert "2 requests per minute" in error["message"]
    assert caught.value.response.headers["retry-after"].isdigit()


async def test_tokens_per_day_budget_refuses_the_next_request(tmp_path: Path) -> None:
    key = await cli_key(tmp_path, "--tpd", "5")
    async with open_gateway(tmp_path) as gw, gw.openai(key=key) as client:
        first = await client.chat.completions.create(**chat("scripted:echo"))  # type: ignore[call-overload]
        with pytest.raises(openai.RateLimitError) as caught:
            await client.chat.completions.create(**chat("scripted:echo"))  # type: ignore[call-overload]
    assert first.usage is not None and first.usage.total_tokens == 6  # 2 in, 4 out: over 5
    assert "token budget exhausted: 6 of 5 tokens per day" in caught.value.message
    assert 1 <= int(caught.value.response.headers["retry-after"]) <= DAY


async def test_the_day_budget_survives_a_restart_and_counts_other_nodes(tmp_path: Path) -> None:
    key = await cli_key(tmp_path, "--tpd", "10")
    async with open_gateway(tmp_path) as gw, gw.openai(key=key) as client:
        first = await client.chat.completions.create(**chat("scripted:echo"))  # type: ignore[call-overload]
        assert first.usage is not None and first.usage.total_tokens == 6
    # A new process: before, its book started at 0 and let 6 + 6 tokens through a 10 budget.
    async with open_gateway(tmp_path) as gw, gw.openai(key=key) as client:
        second = await client.chat.completions.create(**chat("scripted:echo"))  # type: ignore[call-overload]
        assert second.usage is not None and second.usage.total_tokens == 6
        with pytest.raises(openai.RateLimitError) as caught:
            await client.chat.completions.create(**chat("scripted:echo"))  # type: ignore[call-overload]
    assert "token budget exhausted: 12 of 10 tokens per day" in caught.value.message

    # Another node's usage (stored by it): seen within the refresh, here at once (new process).
    other_key = await cli_key(tmp_path, "--tpd", "100")
    async with open_gateway(tmp_path) as gw, gw.openai(key=other_key) as client:
        record_id = (await gw.runtime.db.api_keys.verify(other_key)).id  # type: ignore[union-attr]
        from datetime import UTC, datetime

        from drupe.persistence.gateway_usage import UsageDelta

        await gw.runtime.db.gateway_usage.add(
            [
                UsageDelta(
                    day=datetime.now(UTC).date(),
                    key_id=record_id,
                    owner_id=None,
                    model="scripted:echo",
                    dialect="chat-completions",
                    input_tokens=60,
                    output_tokens=40,
                )
            ]
        )
        with pytest.raises(openai.RateLimitError) as other:
            await client.chat.completions.create(**chat("scripted:echo"))  # type: ignore[call-overload]
    assert "token budget exhausted: 100 of 100 tokens per day" in other.value.message


async def test_a_key_limited_to_agents_sees_and_drives_only_those(tmp_path: Path) -> None:
    async with open_gateway(tmp_path) as gw:
        workspace = tmp_path / "ws"
        workspace.mkdir()
        agents = gw.runtime.db.agents
        mine = await agents.create_agent(
            name="mine", driver_type="inprocess", model_id="scripted:echo", workspace=str(workspace)
        )
        other = await agents.create_agent(
            name="other",
            driver_type="inprocess",
            model_id="scripted:echo",
            workspace=str(workspace),
        )
        key = await cli_key(tmp_path, "--agents", mine.id, "--models", "none:none")
        async with gw.openai(key=key) as client:
            listed = await client.get("/agents", cast_to=object)
            reply = await client.chat.completions.create(**chat(f"agent:{mine.id}"))  # type: ignore[call-overload]
            with pytest.raises(openai.PermissionDeniedError) as refused:
                await client.chat.completions.create(**chat(f"agent:{other.id}"))  # type: ignore[call-overload]
            with pytest.raises(openai.PermissionDeniedError):
                await client.chat.completions.create(**chat("scripted:echo"))  # type: ignore[call-overload]
    assert [a["id"] for a in listed["data"]] == [mine.id]  # type: ignore[index]
    assert reply.choices[0].message.content == "You said: hello there"
    assert f"may not use agent {other.id!r}" in refused.value.message
    assert (await gw.runtime.db.agents.list_sessions(other.id)) == []


def test_keys_list_shows_each_keys_scope(tmp_path: Path) -> None:
    options = ["--models", "a:x, b:*", "--rpm", "3", "--data-dir", str(tmp_path)]
    created = runner.invoke(app, ["keys", "create", "scoped", *options])
    plain = runner.invoke(app, ["keys", "create", "plain", "--data-dir", str(tmp_path)])
    listed = runner.invoke(app, ["keys", "list", "--data-dir", str(tmp_path)])
    assert created.exit_code == plain.exit_code == listed.exit_code == 0
    assert "scope: models a:x,b:*; 3 req/min" in created.output
    lines = listed.output.splitlines()
    assert any("scoped" in line and "models a:x,b:*; 3 req/min" in line for line in lines)
    assert any("plain" in line and "any model or agent, no budget" in line for line in lines)


def test_bad_budgets_are_refused_by_the_cli(tmp_path: Path) -> None:
    result = runner.invoke(app, ["keys", "create", "x", "--rpm", "0", "--data-dir", str(tmp_path)])
    assert result.exit_code != 0
    assert "--rpm" in result.output


# --- the pure budget book, with an injected clock -------------------------------------------------


def record(
    rpm: int | None = None, tpd: int | None = None, models: tuple[str, ...] | None = None
) -> ApiKeyRecord:
    from datetime import UTC, datetime

    return ApiKeyRecord(
        id="key_1",
        name="k",
        prefix="drp_x",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        last_used_at=None,
        revoked_at=None,
        allowed_models=models,
        requests_per_minute=rpm,
        tokens_per_day=tpd,
    )


def test_the_request_window_slides_and_says_how_long_to_wait() -> None:
    book, key = KeyLimiter(), record(rpm=2)
    start = 10 * DAY + 100.0
    assert book.admit(key, start) is None
    assert book.admit(key, start + 20) is None
    assert book.admit(key, start + 30) == (30, "rate limit: 2 requests per minute")
    assert book.admit(key, start + 59.5) == (1, "rate limit: 2 requests per minute")
    assert book.admit(key, start + 60) is None  # the first stamp left the window
    assert book.admit(key, start + 61)[0] == 19  # type: ignore[index]


def test_the_token_day_resets_at_utc_midnight() -> None:
    book, key = KeyLimiter(), record(tpd=100)
    noon = 10 * DAY + DAY / 2
    assert book.admit(key, noon) is None
    book.charge(key, 150, noon)
    assert book.admit(key, noon + 1) == (
        int(DAY / 2) - 1,
        "token budget exhausted: 150 of 100 tokens per day",
    )
    assert book.admit(key, 11 * DAY) is None
    assert book.tokens_today("key_1", 11 * DAY) == 0


def test_a_seed_raises_the_day_count_never_lowers_it() -> None:
    book, key = KeyLimiter(), record(tpd=100)
    noon = 10 * DAY + DAY / 2
    book.charge(key, 30, noon)
    book.seed("key_1", noon, 20)  # stale stored usage: the node's own count stands
    assert book.tokens_today("key_1", noon) == 30
    book.seed("key_1", noon, 120)  # every node's usage: over budget
    assert book.admit(key, noon + 1) == (
        int(DAY / 2) - 1,
        "token budget exhausted: 120 of 100 tokens per day",
    )
    assert book.admit(key, 11 * DAY) is None  # a new day starts at zero


def test_without_counting_requests_only_the_token_budget_applies() -> None:
    book, key = KeyLimiter(), record(rpm=1)
    start = 10 * DAY
    assert book.admit(key, start, count_requests=False) is None
    assert book.admit(key, start + 1, count_requests=False) is None  # not counted here
    assert book.admit(key, start + 2) is None
    assert book.admit(key, start + 3) == (59, "rate limit: 1 requests per minute")


def test_a_key_limited_to_models_drives_no_agent_unless_named() -> None:
    assert check_agent_scope(record(), "a1") is None
    assert check_agent_scope(record(models=("m:x",)), "a1") == (
        "this API key is limited to some models and may drive no agent"
    )
    named = replace(record(models=("m:x",)), allowed_agents=("a1",))
    assert check_agent_scope(named, "a1") is None
    assert check_agent_scope(named, "a2") == "this API key may not use agent 'a2'"


def test_model_scope_patterns() -> None:
    key = record(models=("scripted:echo", "fake:*"))
    assert check_scope(key, "scripted:echo") is None
    assert check_scope(key, "fake:anything") is None
    assert check_scope(key, "scripted:lorem") == "this API key may not use model 'scripted:lorem'"
    assert check_scope(record(), "any:model") is None


@given(
    rpm=st.integers(min_value=1, max_value=5),
    gaps=st.lists(st.floats(min_value=0, max_value=40, allow_nan=False), max_size=40),
)
def test_no_sixty_second_window_admits_more_than_the_budget(rpm: int, gaps: list[float]) -> None:
    book, key = KeyLimiter(), record(rpm=rpm)
    now, admitted = 5 * DAY, []
    for gap in gaps:
        now += gap
        over = book.admit(key, now)
        if over is None:
            admitted.append(now)
        else:
            retry_after, _ = over
            assert 1 <= retry_after <= 60
            # the refusal is honest: waiting that long gets the request in
            assert KeyLimiter.admit(copy.deepcopy(book), key, now + retry_after) is None
    for start in admitted:
        assert sum(1 for t in admitted if start <= t < start + 60) <= rpm
