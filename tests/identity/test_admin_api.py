"""The admin API (issue 20, steps 5, 9 and 10's API), against a real server with auth on:
users made, disabled and demoted by an admin, shares given and taken back by an owner, and the
audit log of all of it (which holds no secret)."""

from __future__ import annotations

from tests.identity.conftest import PASSWORDS, Site

NEW_PASSWORD = "carol-password-4444"


async def test_an_admin_creates_a_user_and_disabling_them_ends_their_session_at_once(
    site: Site,
) -> None:
    root, alice = await site.sign_in("root"), await site.sign_in("alice")
    made = await root.post(
        "/api/users",
        json={"name": "carol", "password": NEW_PASSWORD, "email": "c@example.org"},
    )
    assert made.status_code == 201, made.text
    carol = made.json()
    assert (carol["name"], carol["role"], carol["disabled"]) == ("carol", "member", False)
    assert carol["email"] == "c@example.org" and carol["createdAt"]
    assert NEW_PASSWORD not in made.text

    for body, says in (
        ({"name": "carol", "password": NEW_PASSWORD}, "exists already"),
        ({"name": "dave", "password": "short"}, "8 to 1024"),
        ({"name": "has space", "password": NEW_PASSWORD}, "no spaces"),
        ({"name": "dave", "role": "owner"}, "role"),
        ({"name": "dave", "email": "not-an-address"}, "email"),
        ({"password": NEW_PASSWORD}, "name"),
    ):
        refused = await root.post("/api/users", json=body)
        assert refused.status_code == 422 and says in refused.json()["detail"], (body, refused.text)
    assert (await alice.post("/api/users", json={"name": "eve"})).status_code == 403

    listed = (await root.get("/api/users")).json()["items"]
    assert [u["name"] for u in listed] == ["root", "alice", "bob", "carol"]
    assert {u["role"] for u in listed if u["name"] == "root"} == {"admin"}

    async with site.client(headers={"origin": site.url}) as carol_client:
        signed_in = await carol_client.post(
            "/api/auth/login", json={"username": "carol", "password": NEW_PASSWORD}
        )
        assert signed_in.status_code == 200
        token = (await carol_client.post("/api/auth/tokens", json={"name": "t"})).json()["token"]
        assert (await carol_client.get("/api/auth/me")).status_code == 200  # cached now
        disabled = await root.patch("/api/users/carol", json={"disabled": True})
        assert disabled.status_code == 200 and disabled.json()["disabled"] is True
        # At once: no waiting out the 2 s sign-in cache.
        assert (await carol_client.get("/api/auth/me")).status_code == 401
        async with site.client(headers={"authorization": f"Bearer {token}"}) as by_token:
            assert (await by_token.get("/api/auth/me")).status_code == 401
        again = await carol_client.post(
            "/api/auth/login", json={"username": "carol", "password": NEW_PASSWORD}
        )
        assert again.status_code == 401
        # Enabled again: a new sign-in works, the old session stays ended.
        old_cookie = dict(carol_client.cookies)
        assert (await root.patch("/api/users/carol", json={"disabled": False})).status_code == 200
        async with site.client(cookies=old_cookie) as old:
            assert (await old.get("/api/auth/me")).status_code == 401
        again = await carol_client.post(
            "/api/auth/login", json={"username": "carol", "password": NEW_PASSWORD}
        )
        assert again.status_code == 200

    # The directory: enabled users only, ids and names, no e-mails; any signed-in user.
    assert (await root.patch("/api/users/bob", json={"disabled": True})).status_code == 200
    directory = await alice.get("/api/users/directory")
    assert directory.status_code == 200
    assert [u["name"] for u in directory.json()["items"]] == ["root", "alice", "carol"]
    assert "c@example.org" not in directory.text
    assert set(directory.json()["items"][0]) == {"id", "name"}
    assert (await root.patch("/api/users/bob", json={})).status_code == 422
    assert (await root.patch("/api/users/nobody", json={"role": "admin"})).status_code == 404


async def test_the_last_enabled_admin_cannot_be_demoted_or_disabled(site: Site) -> None:
    root = await site.sign_in("root")
    for change in ({"role": "member"}, {"disabled": True}, {"role": "member", "disabled": True}):
        refused = await root.patch("/api/users/root", json=change)
        assert refused.status_code == 422, refused.text
        assert "last enabled admin" in refused.json()["detail"]
    # A disabled admin does not count: alice an admin, then disabled, root is still the last.
    assert (await root.patch("/api/users/alice", json={"role": "admin"})).status_code == 200
    assert (await root.patch("/api/users/alice", json={"disabled": True})).status_code == 200
    assert (await root.patch("/api/users/root", json={"role": "member"})).status_code == 422
    # With another enabled admin, root may step down; its own session loses admin at once.
    assert (await root.patch("/api/users/alice", json={"disabled": False})).status_code == 200
    stepped = await root.patch("/api/users/root", json={"role": "member"})
    assert stepped.status_code == 200 and stepped.json()["role"] == "member"
    assert (await root.get("/api/users")).status_code == 403
    alice = await site.sign_in("alice")
    assert (await alice.patch("/api/users/alice", json={"role": "member"})).status_code == 422
    roles = {
        u["name"]: (u["role"], u["disabled"])
        for u in (await alice.get("/api/users")).json()["items"]
    }
    assert roles == {
        "root": ("member", False),
        "alice": ("admin", False),
        "bob": ("member", False),
    }


async def test_an_owner_shares_a_conversation_and_an_agent_and_takes_them_back(
    site: Site,
) -> None:
    alice, bob, root = [await site.sign_in(n) for n in ("alice", "bob", "root")]
    conversation = (await alice.post("/api/conversations", json={"title": "plans"})).json()["id"]
    agent = (
        await alice.post(
            "/api/agents",
            json={"name": "helper", "driverType": "inprocess", "modelId": "scripted:echo"},
        )
    ).json()["id"]
    shares = f"/api/shares/conversation/{conversation}"
    assert (await bob.get(f"/api/conversations/{conversation}")).status_code == 404

    given = await alice.put(f"{shares}/bob", json={"access": "read"})
    assert given.status_code == 200, given.text
    assert given.json()["access"] == "read" and given.json()["name"] == "bob"
    assert (await bob.get(f"/api/conversations/{conversation}")).status_code == 200
    renamed = await bob.patch(f"/api/conversations/{conversation}", json={"title": "mine"})
    assert renamed.status_code == 404  # read only
    bob_id = (await bob.get("/api/auth/me")).json()["user"]["id"]
    listed = await alice.get(shares)
    assert listed.json() == {"items": [{"userId": bob_id, "name": "bob", "access": "read"}]}
    assert (await root.get(shares)).json() == listed.json()  # an admin sees any resource's

    # Not the owner: the shares of alice's conversation answer 404, whatever the verb.
    assert (await bob.get(shares)).status_code == 404
    assert (await bob.put(f"{shares}/bob", json={"access": "write"})).status_code == 404
    assert (await bob.delete(f"{shares}/bob")).status_code == 404
    assert (await alice.get("/api/shares/conversation/no-such-id")).status_code == 404

    # Write access lets bob rename it; the agent shared to read lets bob see it.
    assert (await alice.put(f"{shares}/bob", json={"access": "write"})).status_code == 200
    renamed = await bob.patch(f"/api/conversations/{conversation}", json={"title": "ours"})
    assert renamed.status_code == 200
    assert (await bob.get(f"/api/agents/{agent}")).status_code == 404
    agent_share = await alice.put(f"/api/shares/agent/{agent}/bob", json={"access": "read"})
    assert agent_share.status_code == 200
    assert (await bob.get(f"/api/agents/{agent}")).status_code == 200

    for path, body, says in (
        (f"/api/shares/folder/{conversation}/bob", {"access": "read"}, "can be shared"),
        (f"{shares}/bob", {"access": "admin"}, "access"),
        (f"{shares}/alice", {"access": "read"}, "owns this"),
    ):
        refused = await alice.put(path, json=body)
        assert refused.status_code == 422 and says in refused.text, (path, refused.text)
    assert (await alice.put(f"{shares}/nobody", json={"access": "read"})).status_code == 404
    # A name that looks like a key prefix is still just a name (the audit row holds its id).
    assert (await root.post("/api/users", json={"name": "sk-dan"})).status_code == 201
    assert (await alice.put(f"{shares}/sk-dan", json={"access": "read"})).status_code == 200
    assert (await alice.delete(f"{shares}/sk-dan")).status_code == 204

    assert (await alice.delete(f"{shares}/bob")).status_code == 204
    assert (await alice.delete(f"{shares}/bob")).status_code == 204  # nothing left: still 204
    assert (await bob.get(f"/api/conversations/{conversation}")).status_code == 404
    assert (await alice.get(shares)).json() == {"items": []}
    assert (await root.delete(f"/api/shares/agent/{agent}/bob")).status_code == 204
    assert (await bob.get(f"/api/agents/{agent}")).status_code == 404


async def test_the_audit_log_has_every_change_and_no_secret(site: Site) -> None:
    root, alice = await site.sign_in("root"), await site.sign_in("alice")
    assert (
        await root.post("/api/users", json={"name": "carol", "password": NEW_PASSWORD})
    ).status_code == 201
    assert (await root.patch("/api/users/carol", json={"role": "admin"})).status_code == 200
    assert (await root.patch("/api/users/carol", json={"disabled": True})).status_code == 200
    assert (await root.patch("/api/users/carol", json={"disabled": False})).status_code == 200
    conversation = (await alice.post("/api/conversations", json={})).json()["id"]
    assert (
        await alice.put(f"/api/shares/conversation/{conversation}/bob", json={"access": "read"})
    ).status_code == 200
    assert (await alice.delete(f"/api/shares/conversation/{conversation}/bob")).status_code == 204

    log = await root.get("/api/audit", params={"limit": 500})
    assert log.status_code == 200
    events = log.json()["items"]
    ours = [
        (e["action"], e["actorName"], e["target"], e["detail"])
        for e in events
        if not e["action"].startswith("auth.")
    ]
    target = f"conversation:{conversation}"
    bob_id = next(
        u["id"] for u in (await root.get("/api/users")).json()["items"] if u["name"] == "bob"
    )
    assert ours == [  # newest first
        ("share.remove", "alice", target, {"userId": bob_id}),
        ("share.set", "alice", target, {"userId": bob_id, "access": "read"}),
        ("user.enable", "root", "carol", {}),
        ("user.disable", "root", "carol", {"sessionsEnded": 0}),
        ("user.role", "root", "carol", {"from": "member", "to": "admin"}),
        ("user.create", "root", "carol", {"role": "member"}),
    ]
    assert all(e["address"] == "127.0.0.1" for e in events)
    for secret in (NEW_PASSWORD, *PASSWORDS.values()):
        assert secret not in log.text

    only = (await root.get("/api/audit", params={"action": "user.role", "limit": 1})).json()
    assert [e["action"] for e in only["items"]] == ["user.role"]
    newest = (await root.get("/api/audit", params={"limit": 1})).json()["items"]
    assert newest[0]["action"] == "share.remove"
    assert (await root.get("/api/audit", params={"limit": 0})).status_code == 422
    assert (await root.get("/api/audit", params={"limit": 501})).status_code == 422
    assert (await alice.get("/api/audit")).status_code == 403
