"""``GET /api/usage`` over real turns (scripted models, SQLite): the numbers and the limits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
from sqlalchemy import update

from drupe.app import Runtime
from drupe.persistence.tables import MessageRow
from tests.gateway.sse import chat_body, parse_events


async def ask(client: httpx.AsyncClient, conversation_id: str, text: str, model: str) -> None:
    r = await client.post("/api/chat", json={**chat_body(conversation_id, text), "models": [model]})
    assert r.status_code == 200 and parse_events(r.text)[-1].data == "[DONE]"


async def test_usage_counts_answers_and_tokens_of_real_turns(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    await ask(client, "c-lorem", "one", "scripted:lorem?words=6")
    await ask(client, "c-lorem", "two", "scripted:lorem?words=6")
    await ask(client, "c-echo", "three words here", "scripted:echo")
    # Yesterday's answer: move c-echo's rows back one day.
    yesterday = datetime.now(UTC) - timedelta(days=1)
    async with runtime.db.sessions.begin() as db:
        await db.execute(
            update(MessageRow)
            .where(MessageRow.conversation_id == "c-echo")
            .values(created_at=yesterday)
        )

    body = (await client.get("/api/usage", params={"days": 3})).json()

    today = datetime.now(UTC).date()
    assert [d["day"] for d in body["days"]] == [
        (today - timedelta(days=n)).isoformat() for n in (2, 1, 0)
    ]
    assert [d["answers"] for d in body["days"]] == [0, 1, 2]
    # The lorem profile streams exactly `words` words, and the scripted model counts one output
    # token per word.
    assert body["days"][2]["outputTokens"] == 12
    lorem = next(m for m in body["models"] if m["modelId"] == "scripted:lorem?words=6")
    assert (lorem["answers"], lorem["outputTokens"]) == (2, 12)
    stored = [
        m["metadata"]["usage"]
        for cid in ("c-lorem", "c-echo")
        for m in (await client.get(f"/api/conversations/{cid}")).json()["messages"]
        if m["role"] == "assistant"
    ]
    assert body["totals"] == {
        "answers": 3,
        "errors": 0,
        "inputTokens": sum(u["inputTokens"] for u in stored),
        "outputTokens": sum(u["outputTokens"] for u in stored),
        "totalTokens": sum(u["inputTokens"] + u["outputTokens"] for u in stored),
    }
    conversations = body["conversations"]
    assert {c["id"] for c in conversations} == {"c-lorem", "c-echo"}
    totals = [c["totalTokens"] for c in conversations]
    assert totals == sorted(totals, reverse=True)
    assert body["conversationsTotal"] == 2
    assert body["until"] == today.isoformat()


async def test_usage_window_is_explicit_and_bad_input_is_a_4xx(client: httpx.AsyncClient) -> None:
    r = await client.get("/api/usage", params={"days": 7, "until": "2020-02-29"})
    assert r.status_code == 200
    body = r.json()
    assert (body["since"], body["until"], len(body["days"])) == ("2020-02-23", "2020-02-29", 7)
    assert body["totals"]["answers"] == 0 and body["models"] == []
    for params in ({"days": 0}, {"days": 367}, {"until": "yesterday"}, {"top": 0}):
        bad = await client.get("/api/usage", params=params)
        assert bad.status_code == 422, params
        assert isinstance(bad.json()["detail"], str) and bad.json()["detail"]
