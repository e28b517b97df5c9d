"""The shown branch, kept on the server: ``PUT /api/conversations/{id}/branch`` and the
``branchLeafId`` of ``GET /api/conversations/{id}``."""

from __future__ import annotations

import httpx

from tests.gateway.sse import chat_body


async def _rows(client: httpx.AsyncClient, cid: str) -> dict[str, object]:
    return dict((await client.get(f"/api/conversations/{cid}")).json())


async def test_choose_a_branch_until_the_next_turn(client: httpx.AsyncClient) -> None:
    cid = (await client.post("/api/conversations", json={"title": "tree"})).json()["id"]
    assert (await client.post("/api/chat", json=chat_body(cid, "one"))).status_code == 200
    assert (await client.post("/api/chat", json=chat_body(cid, "two"))).status_code == 200
    detail = await _rows(client, cid)
    _u1, a1, u2, a2 = detail["messages"]  # type: ignore[misc]
    assert detail["branchLeafId"] is None  # the default: the newest message's branch
    body = chat_body(cid, "two, edited", parentId=a1["id"])
    assert (await client.post("/api/chat", json=body)).status_code == 200
    detail = await _rows(client, cid)
    u3, a3 = detail["messages"][4:]  # type: ignore[index]

    # back to the old branch: through u2, down to its newest leaf a2
    r = await client.put(f"/api/conversations/{cid}/branch", json={"messageId": u2["id"]})
    assert r.status_code == 200 and r.json() == {"leafId": a2["id"]}
    assert (await _rows(client, cid))["branchLeafId"] == a2["id"]
    # and forth again
    r = await client.put(f"/api/conversations/{cid}/branch", json={"messageId": u3["id"]})
    assert r.json() == {"leafId": a3["id"]}

    # back once more, then a new turn: the new message's branch is shown again
    await client.put(f"/api/conversations/{cid}/branch", json={"messageId": u2["id"]})
    assert (await client.post("/api/chat", json=chat_body(cid, "three"))).status_code == 200
    assert (await _rows(client, cid))["branchLeafId"] is None


async def test_bad_branch_requests(client: httpx.AsyncClient) -> None:
    cid = (await client.post("/api/conversations", json={})).json()["id"]
    r = await client.put(f"/api/conversations/{cid}/branch", json={"messageId": "msg_nope"})
    assert r.status_code == 404 and "msg_nope" in r.text
    r = await client.put("/api/conversations/nope/branch", json={"messageId": "m"})
    assert r.status_code == 404
    r = await client.put(f"/api/conversations/{cid}/branch", json={})
    assert r.status_code == 422
    eph = (await client.post("/api/conversations", json={"ephemeral": True})).json()["id"]
    r = await client.put(f"/api/conversations/{eph}/branch", json={"messageId": "m"})
    assert r.status_code == 422 and "ephemeral" in r.text
