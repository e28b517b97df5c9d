"""Edit and resend: ``POST /api/chat`` with ``parentId`` stores the new user message beside the
edited one (a new branch from the same parent) and answers it from that branch's history."""

from __future__ import annotations

from typing import Any

import httpx

from tests.gateway.sse import chat_body


def _text(row: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in row["parts"] if p.get("type") == "text")


async def test_parent_id_starts_a_branch(client: httpx.AsyncClient) -> None:
    cid = (await client.post("/api/conversations", json={"title": "branching"})).json()["id"]
    for text in ("first question", "second question"):
        assert (await client.post("/api/chat", json=chat_body(cid, text))).status_code == 200
    rows = (await client.get(f"/api/conversations/{cid}")).json()["messages"]
    _u1, a1, u2, a2 = rows
    assert u2["parentId"] == a1["id"]

    edited = chat_body(cid, "second question, edited", parentId=a1["id"])
    assert (await client.post("/api/chat", json=edited)).status_code == 200
    rows = (await client.get(f"/api/conversations/{cid}")).json()["messages"]
    assert len(rows) == 6
    u3, a3 = rows[4], rows[5]
    assert u3["parentId"] == a1["id"] == u2["parentId"]  # a sibling of the edited message
    assert a3["parentId"] == u3["id"]
    assert _text(a3) == "You said: second question, edited"
    # the old branch is kept
    assert {r["id"] for r in rows} >= {u2["id"], a2["id"]}


async def test_a_foreign_or_unknown_parent_is_refused(client: httpx.AsyncClient) -> None:
    other = (await client.post("/api/conversations", json={})).json()["id"]
    assert (await client.post("/api/chat", json=chat_body(other, "x"))).status_code == 200
    foreign = (await client.get(f"/api/conversations/{other}")).json()["messages"][0]["id"]
    cid = (await client.post("/api/conversations", json={})).json()["id"]
    assert (await client.post("/api/chat", json=chat_body(cid, "y"))).status_code == 200
    for parent in (foreign, "msg_nope"):
        r = await client.post("/api/chat", json=chat_body(cid, "z", parentId=parent))
        assert 400 <= r.status_code < 500, r.text
    assert len((await client.get(f"/api/conversations/{cid}")).json()["messages"]) == 2


async def test_new_root_edits_the_first_message(client: httpx.AsyncClient) -> None:
    cid = (await client.post("/api/conversations", json={})).json()["id"]
    for text in ("first question", "second question"):
        assert (await client.post("/api/chat", json=chat_body(cid, text))).status_code == 200
    u1, a1, _u2, a2 = (await client.get(f"/api/conversations/{cid}")).json()["messages"]
    assert u1["parentId"] is None

    edited = chat_body(cid, "first question, edited", newRoot=True)
    assert (await client.post("/api/chat", json=edited)).status_code == 200
    rows = (await client.get(f"/api/conversations/{cid}")).json()["messages"]
    assert len(rows) == 6
    u3, a3 = rows[4], rows[5]
    assert u3["parentId"] is None and a3["parentId"] == u3["id"]  # a second root
    assert _text(a3) == "You said: first question, edited"

    # the next message continues the new branch, not the old one
    assert (await client.post("/api/chat", json=chat_body(cid, "then"))).status_code == 200
    rows = (await client.get(f"/api/conversations/{cid}")).json()["messages"]
    assert rows[6]["parentId"] == a3["id"] != a2["id"]
    assert {r["id"] for r in rows} >= {u1["id"], a1["id"], a2["id"]}  # the old branch is kept


async def test_new_root_with_a_parent_or_a_regenerate_is_refused(
    client: httpx.AsyncClient,
) -> None:
    cid = (await client.post("/api/conversations", json={})).json()["id"]
    assert (await client.post("/api/chat", json=chat_body(cid, "x"))).status_code == 200
    first = (await client.get(f"/api/conversations/{cid}")).json()["messages"][0]["id"]
    both = chat_body(cid, "y", newRoot=True, parentId=first)
    regenerate = chat_body(cid, "x", newRoot=True, trigger="regenerate-message")
    for body in (both, regenerate):
        r = await client.post("/api/chat", json=body)
        assert r.status_code == 422, r.text
        assert "newRoot" in r.json()["detail"]
    assert len((await client.get(f"/api/conversations/{cid}")).json()["messages"]) == 2
