"""An agent shared from its owner (the share dialog's kind "agent"), against a real server.

Expected, from the contracts of ``identity/resources.py`` and ``identity/policy.py``: a member
the agent is not shared with gets 404 for it and every route under it and does not see it
listed; shared to read, the member sees it (its ``ownerId`` is the owner's, so the UI shows
it as shared), starts sessions of their own with it, lists and reads the owner's sessions with
it, but cannot change, delete or share it, nor write in, rename or delete the owner's session
(404 each); shared to write, the member changes it and writes in its sessions but still cannot
delete it nor the owner's session; taken back, it is 404 again.
"""

from __future__ import annotations

from typing import Any

from tests.identity.conftest import Site

NO_SUCH_APPROVAL = {"decisions": [{"approvalId": "no-such-approval", "approved": True}]}


def _chat(conversation_id: str, message_id: str) -> dict[str, Any]:
    parts = [{"type": "text", "text": "hi"}]
    return {
        "id": conversation_id,
        "messages": [{"id": message_id, "role": "user", "parts": parts}],
    }


async def test_a_read_share_sees_an_agent_and_uses_it_but_cannot_change_it(site: Site) -> None:
    alice, bob = await site.sign_in("alice"), await site.sign_in("bob")
    alice_id = (await alice.get("/api/auth/me")).json()["user"]["id"]
    made = await alice.post(
        "/api/agents",
        json={"name": "helper", "driverType": "inprocess", "modelId": "scripted:echo"},
    )
    assert made.status_code == 201, made.text
    agent = made.json()
    assert agent["ownerId"] == alice_id
    agent_url = f"/api/agents/{agent['id']}"
    session = (await alice.post(f"{agent_url}/sessions", json={})).json()
    said = await alice.post("/api/chat", json=_chat(session["conversationId"], "a1"))
    assert said.status_code == 200, said.text

    # Not shared: 404 for the agent, its sessions and the owner's session; not listed.
    for method, path in (
        ("GET", agent_url),
        ("GET", f"{agent_url}/sessions"),
        ("POST", f"{agent_url}/sessions"),
        ("PATCH", agent_url),
        ("DELETE", agent_url),
        ("GET", f"/api/conversations/{session['conversationId']}"),
        ("GET", f"/api/sessions/{session['id']}"),
        ("GET", f"/api/shares/agent/{agent['id']}"),
    ):
        reply = await bob.request(method, path, json={} if method in ("POST", "PATCH") else None)
        assert reply.status_code == 404, (method, path, reply.status_code, reply.text)
    assert agent["id"] not in (await bob.get("/api/agents")).text

    shared = await alice.put(f"/api/shares/agent/{agent['id']}/bob", json={"access": "read"})
    assert shared.status_code == 200, shared.text
    listed = (await bob.get("/api/agents")).json()["items"]
    assert [(a["id"], a["ownerId"]) for a in listed] == [(agent["id"], alice_id)]
    assert (await bob.get(agent_url)).json()["name"] == "helper"
    own = await bob.post(f"{agent_url}/sessions", json={})
    assert own.status_code == 201, own.text
    theirs = await bob.get(f"/api/conversations/{session['conversationId']}")
    assert theirs.status_code == 200, theirs.text
    assert (await bob.get(f"/api/sessions/{session['id']}")).json()["agentId"] == agent["id"]
    listed_sessions = (await bob.get(f"{agent_url}/sessions")).json()["items"]
    assert {s["id"] for s in listed_sessions} == {session["id"], own.json()["id"]}
    # The sidebar's own list stays the member's own sessions.
    assert [s["id"] for s in (await bob.get("/api/sessions")).json()["items"]] == [own.json()["id"]]
    for method, path, body in (
        ("PATCH", agent_url, {"name": "bob's now"}),
        ("DELETE", agent_url, None),
        ("GET", f"/api/shares/agent/{agent['id']}", None),
        ("PUT", f"/api/shares/agent/{agent['id']}/root", {"access": "read"}),
        ("POST", "/api/chat", _chat(session["conversationId"], "b1")),
        ("PATCH", f"/api/sessions/{session['id']}", {"title": "bob's"}),
        ("DELETE", f"/api/sessions/{session['id']}", None),
        ("POST", f"/api/sessions/{session['id']}/approvals", NO_SUCH_APPROVAL),
    ):
        reply = await bob.request(method, path, json=body)
        assert reply.status_code == 404, (method, path, reply.status_code, reply.text)
    assert (await alice.get(agent_url)).json()["name"] == "helper"

    # Write: bob renames it, but deleting stays the owner's.
    assert (
        await alice.put(f"/api/shares/agent/{agent['id']}/bob", json={"access": "write"})
    ).status_code == 200
    renamed = await bob.patch(agent_url, json={"name": "our helper"})
    assert renamed.status_code == 200, renamed.text
    assert (await bob.delete(agent_url)).status_code == 404
    assert (await alice.get(agent_url)).json()["name"] == "our helper"
    wrote = await bob.post("/api/chat", json=_chat(session["conversationId"], "b2"))
    assert wrote.status_code == 200, wrote.text
    answered = await bob.post(f"/api/sessions/{session['id']}/approvals", json=NO_SUCH_APPROVAL)
    assert answered.status_code == 200, answered.text
    assert (await bob.delete(f"/api/sessions/{session['id']}")).status_code == 404

    # Taken back: 404 again, and gone from bob's list.
    assert (await alice.delete(f"/api/shares/agent/{agent['id']}/bob")).status_code == 204
    assert (await bob.get(agent_url)).status_code == 404
    assert (await bob.get(f"/api/sessions/{session['id']}")).status_code == 404
    assert (await bob.get("/api/agents")).json()["items"] == []
