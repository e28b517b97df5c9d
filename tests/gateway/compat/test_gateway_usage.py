"""Gateway usage (issue 23, item 12): every ``/v1`` request is counted per key, user, model and
dialect, with the tokens the upstream reported, and ``GET /api/usage`` shows it.

Real parts only: the official ``openai`` and ``anthropic`` clients talk to Drupe on loopback,
whose ``fake`` provider is the loopback fake OpenAI server; the expected numbers are the usage
each scripted upstream reply reported, not anything Drupe computed.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from drupe.persistence.gateway_usage import UsageDelta
from drupe.settings import AuthSettings
from drupe.testing.fake_providers import FakeReply, RequestRecorder, fake_openai_server
from tests.gateway.compat.conftest import open_gateway

# One reply per upstream request, in order; each reports its own usage.
REPLIES = [
    FakeReply(text="one", input_tokens=11, output_tokens=3),  # key A, chat, pass-through
    FakeReply(text="two two", input_tokens=13, output_tokens=5),  # key A, chat, streamed
    FakeReply(text="three", input_tokens=17, output_tokens=7),  # key B, responses
    FakeReply(text="four", input_tokens=19, output_tokens=2),  # key B, anthropic messages
]


def config(tmp_path: Path, upstream: str) -> Path:
    path = tmp_path / "usage.toml"
    path.write_text(
        f'[providers.fake]\ntype = "openai-compatible"\nbase_url = "{upstream}"\n'
        'models = ["fake-1"]\n'
    )
    return path


def tokens(reply: FakeReply) -> tuple[int, int]:
    return reply.input_tokens, reply.usage_output_tokens


def totals(*pairs: tuple[int, int], requests: int) -> dict[str, int]:
    inputs, outputs = sum(p[0] for p in pairs), sum(p[1] for p in pairs)
    return {
        "requests": requests,
        "inputTokens": inputs,
        "outputTokens": outputs,
        "totalTokens": inputs + outputs,
    }


async def test_every_gateway_request_is_counted_with_the_upstreams_tokens(tmp_path: Path) -> None:
    recorder = RequestRecorder()
    async with (
        fake_openai_server(REPLIES, recorder=recorder) as upstream,
        open_gateway(tmp_path, config_path=config(tmp_path, upstream)) as gw,
    ):
        key_a, record_a = await gw.runtime.db.api_keys.create("team a")
        key_b, record_b = await gw.runtime.db.api_keys.create("team b")
        async with gw.openai(key_a) as client:
            plain = await client.chat.completions.create(
                model="fake:fake-1", messages=[{"role": "user", "content": "1"}]
            )
            stream = await client.chat.completions.create(
                model="fake:fake-1",
                messages=[{"role": "user", "content": "2"}],
                stream=True,
                stream_options={"include_usage": True},
            )
            streamed = [chunk async for chunk in stream]
            echo = await client.chat.completions.create(
                model="scripted:echo",
                messages=[{"role": "user", "content": "four words echo back"}],
            )
        async with gw.openai(key_b) as client:
            response = await client.responses.create(model="fake:fake-1", input="3")
        async with gw.anthropic(key_b) as anthropic_client:
            message = await anthropic_client.messages.create(
                model="fake:fake-1", max_tokens=20, messages=[{"role": "user", "content": "4"}]
            )
        async with httpx.AsyncClient(base_url=gw.url, timeout=20) as api:
            body = (await api.get("/api/usage", params={"days": 1})).json()
            text = (await api.get("/api/usage")).text
        rows = await gw.runtime.db.gateway_usage.rows(
            since=datetime.now(UTC).date() - timedelta(days=1), until=datetime.now(UTC).date()
        )

    assert len(recorder.bodies) == len(REPLIES)  # one upstream call per reply, in order
    # What the clients saw agrees with what the upstream reported.
    assert plain.usage is not None and (
        plain.usage.prompt_tokens,
        plain.usage.completion_tokens,
    ) == tokens(REPLIES[0])
    assert streamed[-1].usage is not None
    assert (streamed[-1].usage.prompt_tokens, streamed[-1].usage.completion_tokens) == tokens(
        REPLIES[1]
    )
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == tokens(REPLIES[2])
    assert (message.usage.input_tokens, message.usage.output_tokens) == tokens(REPLIES[3])
    assert echo.usage is not None
    echoed = (echo.usage.prompt_tokens, echo.usage.completion_tokens)

    gateway = body["gateway"]
    fake = [tokens(r) for r in REPLIES]
    assert gateway["totals"] == totals(*fake, echoed, requests=5)
    assert [d["requests"] for d in gateway["days"]] == [5]
    keys = {k["keyId"]: k for k in gateway["keys"]}
    assert keys.keys() == {record_a.id, record_b.id}
    assert keys[record_a.id] == {
        "keyId": record_a.id,
        "name": "team a",
        "prefix": record_a.prefix,
        "revoked": False,
        **totals(fake[0], fake[1], echoed, requests=3),
    }
    assert keys[record_b.id]["name"] == "team b"
    assert {k: v for k, v in keys[record_b.id].items() if k in totals(requests=0)} == totals(
        fake[2], fake[3], requests=2
    )
    models = {m["modelId"]: m for m in gateway["models"]}
    assert models["fake:fake-1"] == {"modelId": "fake:fake-1", **totals(*fake, requests=4)}
    assert models["scripted:echo"] == {"modelId": "scripted:echo", **totals(echoed, requests=1)}
    dialects = {d["dialect"]: d["requests"] for d in gateway["dialects"]}
    assert dialects == {"chat-completions": 3, "responses": 1, "messages": 1}
    # Auth is off here: every request acts as the one local admin.
    assert [(u["userId"], u["requests"]) for u in gateway["users"]] == [("local", 5)]
    # Aggregated rows, not one per request: key A's two pass-through chats share a row.
    groups = Counter((r.key_id, r.model, r.dialect) for r in rows)
    assert groups == {
        (record_a.id, "fake:fake-1", "chat-completions"): 1,
        (record_a.id, "scripted:echo", "chat-completions"): 1,
        (record_b.id, "fake:fake-1", "responses"): 1,
        (record_b.id, "fake:fake-1", "messages"): 1,
    }
    assert sum(r.requests for r in rows) == 5
    # Keys are named, never shown.
    assert key_a not in text and key_b not in text and record_a.prefix in text


async def test_usage_is_per_user_with_auth_on(tmp_path: Path) -> None:
    recorder = RequestRecorder()
    async with (
        fake_openai_server(REPLIES, recorder=recorder) as upstream,
        open_gateway(
            tmp_path, config_path=config(tmp_path, upstream), auth=AuthSettings(enabled=True)
        ) as gw,
    ):
        root = await gw.runtime.db.users.create("root", password="root-password-333", role="admin")
        alice = await gw.runtime.db.users.create("alice", password="alice-password-1")
        key_root, _ = await gw.runtime.db.api_keys.create("root's", owner_id=root.id)
        key_alice, _ = await gw.runtime.db.api_keys.create("alice's", owner_id=alice.id)
        for key, content in ((key_alice, "1"), (key_alice, "2"), (key_root, "3")):
            async with gw.openai(key) as client:
                await client.chat.completions.create(
                    model="fake:fake-1", messages=[{"role": "user", "content": content}]
                )
        async with httpx.AsyncClient(
            base_url=gw.url, timeout=20, headers={"origin": gw.url}
        ) as api:
            signed_in = await api.post(
                "/api/auth/login", json={"username": "root", "password": "root-password-333"}
            )
            assert signed_in.status_code == 200, signed_in.text
            body = (await api.get("/api/usage", params={"days": 1})).json()

    users = {u["userId"]: u for u in body["gateway"]["users"]}
    assert users[alice.id] == {
        "userId": alice.id,
        "name": "alice",
        **totals(tokens(REPLIES[0]), tokens(REPLIES[1]), requests=2),
    }
    assert users[root.id]["name"] == "root"
    assert users[root.id]["requests"] == 1
    assert users[root.id]["totalTokens"] == sum(tokens(REPLIES[2]))


async def test_the_window_is_validated_and_bad_input_is_a_clear_422(tmp_path: Path) -> None:
    async with open_gateway(tmp_path) as gw:
        today = datetime.now(UTC).date()
        await gw.runtime.db.gateway_usage.add(
            [
                UsageDelta(day=today - timedelta(days=3), key_id=None, owner_id=None,
                           model="scripted:echo", dialect="messages", input_tokens=4),
                UsageDelta(day=today, key_id=None, owner_id=None, model="scripted:echo",
                           dialect="messages", output_tokens=6),
            ]
        )  # fmt: skip
        async with httpx.AsyncClient(base_url=gw.url, timeout=20) as api:
            since = (today - timedelta(days=3)).isoformat()
            window = (await api.get("/api/usage", params={"since": since})).json()
            older = (await api.get("/api/usage", params={"since": since, "until": since})).json()
            bad = {
                "since after until": {"since": today.isoformat(), "until": since},
                "both since and days": {"since": since, "days": 3},
                "over 366 days": {"since": "2020-01-01", "until": "2021-12-31"},
                "not a date": {"since": "last week"},
            }
            refused = {name: await api.get("/api/usage", params=p) for name, p in bad.items()}
    assert (window["since"], window["until"]) == (since, today.isoformat())
    assert [d["totalTokens"] for d in window["gateway"]["days"]] == [4, 0, 0, 6]
    assert window["gateway"]["keys"] == [
        {"keyId": None, "name": None, "prefix": None, "revoked": None, **totals((4, 6), requests=2)}
    ]
    assert older["gateway"]["totals"] == totals((4, 0), requests=1)
    for name, reply in refused.items():
        assert reply.status_code == 422, name
        detail = reply.json()["detail"]
        assert isinstance(detail, str) and detail, name
    assert "is after until" in refused["since after until"].json()["detail"]
    assert "not both" in refused["both since and days"].json()["detail"]
    assert "at most 366" in refused["over 366 days"].json()["detail"]
    assert "since" in refused["not a date"].json()["detail"]


async def test_a_window_before_year_one_is_a_422_not_a_crash(tmp_path: Path) -> None:
    async with open_gateway(tmp_path) as gw, httpx.AsyncClient(base_url=gw.url) as api:
        reply = await api.get("/api/usage", params={"until": "0001-01-05", "days": 30})
    assert reply.status_code == 422
    assert "before year 1" in reply.json()["detail"]
