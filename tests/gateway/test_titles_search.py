"""Automatic titles from the first exchange, and ``GET /api/search`` over the real runtime."""

from __future__ import annotations

import anyio
import httpx
import pytest

from drupe.api.titles import title_from_parts, title_from_text
from drupe.app import Runtime
from tests.gateway.sse import chat_body, parse_events


async def _title(client: httpx.AsyncClient, cid: str) -> str | None:
    """The conversation's title once the titler wrote it (it runs beside the turn)."""
    with anyio.fail_after(30):
        while True:
            title = (await client.get(f"/api/conversations/{cid}")).json()["title"]
            if title is not None:
                return str(title)
            await anyio.sleep(0.05)


def test_title_rule() -> None:
    assert (
        title_from_text("  **How** do I\n\n roll back `kubectl`? ")
        == "How do I roll back kubectl ?"
    )
    assert title_from_text("one two three four five six seven eight nine") == (
        "one two three four five six seven eight…"
    )
    long = "x" * 100
    assert title_from_text(long) == "x" * 59 + "…"
    assert title_from_text("### ") is None
    assert title_from_parts([{"type": "file", "filename": "report.pdf", "url": "data:,"}]) == (
        "report.pdf"
    )
    assert title_from_parts([{"type": "reasoning", "text": "hmm"}]) is None


async def test_first_message_titles_an_untitled_conversation(client: httpx.AsyncClient) -> None:
    r = await client.post("/api/chat", json=chat_body("c-title", "Plan the database migration"))
    assert r.status_code == 200 and parse_events(r.text)[-1].data == "[DONE]"
    assert await _title(client, "c-title") == "Plan the database migration"
    # a second message does not rename it
    body = chat_body("c-title", "something else entirely", message_id="m2")
    assert (await client.post("/api/chat", json=body)).status_code == 200
    listing = (await client.get("/api/conversations")).json()["items"]
    assert [i["title"] for i in listing if i["id"] == "c-title"] == ["Plan the database migration"]


async def test_a_given_title_is_kept(client: httpx.AsyncClient, runtime: Runtime) -> None:
    cid = (await client.post("/api/conversations", json={"title": "mine"})).json()["id"]
    assert (await client.post("/api/chat", json=chat_body(cid, "hello there"))).status_code == 200
    assert await runtime.db.conversations.title_if_untitled(cid, "other") is False
    assert (await client.get(f"/api/conversations/{cid}")).json()["title"] == "mine"


async def test_ephemeral_conversations_are_not_titled(client: httpx.AsyncClient) -> None:
    cid = (await client.post("/api/conversations", json={"ephemeral": True})).json()["id"]
    assert (await client.post("/api/chat", json=chat_body(cid, "secret words"))).status_code == 200
    assert (await client.get(f"/api/conversations/{cid}")).json()["title"] is None
    assert (await client.get("/api/search", params={"q": "secret"})).json()["items"] == []


async def test_search_finds_the_message_and_the_title(client: httpx.AsyncClient) -> None:
    r = await client.post("/api/chat", json=chat_body("c-find", "Where is the quarterly report?"))
    assert r.status_code == 200
    await _title(client, "c-find")
    found = (await client.get("/api/search", params={"q": "quarter"})).json()["items"]
    # the title (from the message) first, then the user message, then the echoed answer
    assert found[0]["conversationId"] == "c-find" and found[0]["messageId"] is None
    messages = [i for i in found if i["messageId"] is not None]
    assert {i["role"] for i in messages} == {"user", "assistant"}
    user = next(i for i in messages if i["role"] == "user")
    stored = (await client.get("/api/conversations/c-find")).json()["messages"]
    assert user["messageId"] == next(m["id"] for m in stored if m["role"] == "user")
    assert user["title"] == "Where is the quarterly report?"
    assert {"text": "quarterly", "match": True} in user["snippet"]


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"q": ""}, "q"),
        ({"q": "?!"}, "at least one word"),
        ({"q": "x" * 201}, "q"),
        ({"q": "x", "limit": 0}, "limit"),
        ({"q": "x", "limit": 51}, "limit"),
        ({}, "q"),
    ],
)
async def test_bad_search_queries_are_422(
    client: httpx.AsyncClient, params: dict[str, object], needle: str
) -> None:
    r = await client.get("/api/search", params=params)
    assert r.status_code == 422
    assert needle in r.text
