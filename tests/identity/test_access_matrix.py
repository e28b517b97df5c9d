"""The access matrix (issue 20): every route of the OpenAPI schema, walked as {anonymous,
owner, another member, read share, admin}, with real ids of the owner's resources.

Expected, independently of the code: anonymous gets 401 on every route but health and the
sign-in routes (the gateway: its own 401); the owner, a read share and an admin read the
owner's conversation; another member gets 404 for each of the owner's resources (never 403,
never 200) and sees none of their ids in any listing; a read share cannot change anything
(404). A route added later without a rule here fails ``test_every_route_is_in_the_matrix``.
"""

from __future__ import annotations

import re
from typing import Any

from tests.identity.conftest import Site

PUBLIC: set[tuple[str, str]] = {
    ("GET", "/healthz"),
    ("POST", "/api/auth/login"),
    ("POST", "/api/auth/logout"),
    ("GET", "/api/auth/methods"),
    ("GET", "/api/auth/link"),
    ("GET", "/api/auth/oidc/login"),
    ("GET", "/api/auth/oidc/callback"),
    ("GET", "/api/auth/oidc/signed-out"),
    ("GET", "/.well-known/agent-card.json"),
    ("GET", "/a2a/{agent_id}/.well-known/agent-card.json"),
}
ADMIN_ONLY = {
    "/metrics",
    "/api/channels",
    "/api/channels/{channel_id}",
    "/api/users",
    "/api/users/{name}",
    "/api/users/{name}/chat-accounts/{channel}/{platform_user_id}",
    "/api/audit",
    "/api/settings/providers",
    "/api/settings/providers/{name}",
    "/api/settings/providers/{name}/test",
    "/api/settings/models",
    "/api/settings/models/{provider}/{name}",
}
# Routes that name no resource of the owner: any signed-in user may call them.
OPEN_TO_MEMBERS = {
    "/api/models",
    "/api/mcp",
    "/api/limits",
    "/api/drivers",
    "/api/auth/me",
    "/api/auth/tokens",
    "/api/auth/chat-accounts",
    "/api/status",
    "/api/conversations",
    "/api/agents",
    "/api/sessions",
    "/api/schedules",
    "/api/search",
    "/api/usage",
    "/api/users/directory",
    "/api/keys",
}


async def _ids(site: Site, alice: Any) -> dict[str, str]:
    conversation = (await alice.post("/api/conversations", json={"title": "alice secret"})).json()
    # One answered turn: the status board knows the conversation, and it has real messages.
    turn = await alice.post(
        "/api/chat",
        json={
            "id": conversation["id"],
            "messages": [
                {"id": "alice-msg-1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
            ],
        },
    )
    assert turn.status_code == 200, turn.text
    agent = (
        await alice.post(
            "/api/agents",
            json={"name": "alice agent", "driverType": "inprocess", "modelId": "scripted:echo"},
        )
    ).json()
    session = (await alice.post(f"/api/agents/{agent['id']}/sessions", json={})).json()
    schedule = await alice.post(
        "/api/schedules",
        json={
            "agentId": agent["id"],
            "name": "alice task",
            "prompt": "hi",
            "trigger": {"kind": "interval", "seconds": 3600},
            "enabled": False,
        },
    )
    assert schedule.status_code == 201, schedule.text
    key = await alice.post("/api/keys", json={"name": "alice key"})
    assert key.status_code == 201, key.text
    # A chat account of alice's, linked as a channel does when it gets `/link <code>`.
    code = (await alice.post("/api/auth/chat-accounts/code")).json()["code"]
    linked = await site.runtime.db.chat_links.redeem(
        code, channel_id="alice-im-channel", platform_user_id="alice-im-4242"
    )
    assert linked is not None and linked.name == "alice"
    return {
        "channel": "alice-im-channel",
        "platform_user_id": "alice-im-4242",
        "key_id": key.json()["id"],
        "message_id": "alice-msg-1",
        "conversation_id": conversation["id"],
        "agent_id": agent["id"],
        "session_id": session["id"],
        "schedule_id": schedule.json()["id"],
    }


def _routes(schema: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (method.upper(), path)
        for path, ops in schema["paths"].items()
        for method in ops
        if method in ("get", "post", "put", "patch", "delete")
    ]


def _fill(path: str, ids: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)(?::path)?\}", lambda m: ids.get(m.group(1), "x"), path)


async def test_every_route_is_in_the_matrix_and_anonymous_gets_401(site: Site) -> None:
    root = await site.sign_in("root")
    schema = (await root.get("/openapi.json")).json()
    routes = _routes(schema)
    assert len(routes) > 50
    async with site.client() as anon:
        for method, path in routes:
            url = _fill(path, {"provider": "scripted", "target": "scripted:echo"})
            reply = await anon.request(method, url, json={} if method != "GET" else None)
            if (method, path) in PUBLIC:
                assert reply.status_code != 401, (method, path)
            else:
                assert reply.status_code == 401, (method, path, reply.status_code, reply.text)


async def test_another_member_gets_404_for_every_resource_of_the_owner(site: Site) -> None:
    alice, bob, root = [await site.sign_in(n) for n in ("alice", "bob", "root")]
    ids = await _ids(site, alice)
    schema = (await root.get("/openapi.json")).json()
    checked = 0
    for method, path in _routes(schema):
        if not path.startswith("/api/") or (method, path) in PUBLIC:
            continue
        names = set(re.findall(r"\{(\w+)\}", path))
        if path in ADMIN_ONLY:
            reply = await bob.request(method, _fill(path, ids), json={})
            assert reply.status_code == 403, (method, path)
            continue
        if names and not names & set(ids):  # an id of no resource here (a run, a token)
            reply = await bob.request(method, _fill(path, ids), json={})
            assert reply.status_code in (404, 422), (method, path, reply.text)
            continue
        if not names:
            assert path in OPEN_TO_MEMBERS or method != "GET", path
            if method == "GET":
                reply = await bob.get(path, params={"q": "alice"} if "search" in path else None)
                assert reply.status_code == 200, (path, reply.text)
                for value in ids.values():
                    assert value not in reply.text, (path, value)
                assert "alice secret" not in reply.text
            continue
        url = _fill(path, ids)
        reply = await bob.request(method, url, json={} if method != "GET" else None)
        assert reply.status_code in (404, 422), (method, path, reply.status_code, reply.text)
        if reply.status_code == 422:  # the body was refused first: try a plausible one
            continue
        checked += 1
        if method == "GET" and not path.endswith(("/stream", "/events")):  # SSE: bob's 404 only
            owner_view = await alice.get(url)
            assert owner_view.status_code == 200, (path, owner_view.text)
            admin_view = await root.get(url)
            assert admin_view.status_code == 200, (path, admin_view.text)
    assert checked >= 15
    # Nothing of alice's was deleted or changed by bob's attempts.
    still = (await alice.get(f"/api/conversations/{ids['conversation_id']}")).json()
    assert still["title"] == "alice secret"
    assert (await alice.get(f"/api/agents/{ids['agent_id']}")).status_code == 200
    assert (await alice.get(f"/api/schedules/{ids['schedule_id']}")).status_code == 200
    keys = (await alice.get("/api/keys")).json()["items"]
    assert [(k["id"], k["revoked"]) for k in keys] == [(ids["key_id"], False)]
    accounts = (await alice.get("/api/auth/chat-accounts")).json()["accounts"]
    assert [a["platformUserId"] for a in accounts] == ["alice-im-4242"]


async def test_a_read_share_can_read_but_not_change(site: Site) -> None:
    alice, bob = await site.sign_in("alice"), await site.sign_in("bob")
    ids = await _ids(site, alice)
    conversation_id = ids["conversation_id"]
    shown = (await alice.get(f"/api/conversations/{conversation_id}")).json()
    message_id = shown["messages"][0]["id"]
    bob_id = (await bob.get("/api/auth/me")).json()["user"]["id"]
    await site.runtime.db.shares.share("conversation", conversation_id, bob_id, "read")
    assert (await bob.get(f"/api/conversations/{conversation_id}")).status_code == 200
    listed = (await bob.get("/api/conversations")).text
    assert conversation_id in listed
    for method, path, body in (
        ("PATCH", f"/api/conversations/{conversation_id}", {"title": "bob's now"}),
        ("DELETE", f"/api/conversations/{conversation_id}", None),
        ("POST", f"/api/chat/{conversation_id}/stop", None),
        ("PUT", f"/api/conversations/{conversation_id}/branch", {"messageId": message_id}),
    ):
        reply = await bob.request(method, path, json=body)
        assert reply.status_code == 404, (method, path, reply.text)
    submit = await bob.post(
        "/api/chat",
        json={
            "id": conversation_id,
            "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
        },
    )
    assert submit.status_code == 404, submit.text
    assert (await alice.get(f"/api/conversations/{conversation_id}")).json()["title"] == (
        "alice secret"
    )
    # Write access, given later, lets bob rename it.
    await site.runtime.db.shares.share("conversation", conversation_id, bob_id, "write")
    renamed = await bob.patch(f"/api/conversations/{conversation_id}", json={"title": "shared"})
    assert renamed.status_code == 200
    # ... but deleting stays the owner's: 404, and the conversation is still there.
    deleted = await bob.delete(f"/api/conversations/{conversation_id}")
    assert deleted.status_code == 404, deleted.text
    assert (await alice.get(f"/api/conversations/{conversation_id}")).status_code == 200
