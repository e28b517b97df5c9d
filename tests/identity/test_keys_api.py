"""Gateway keys as the signed-in user's own (``/api/keys``, issue 22): a member creates a
scoped key, sees its plaintext once, lists only their own keys, uses it on ``/v1``, revokes it;
another member's key is a 404 to list and revoke alike; an admin sees every key with its owner
and may revoke it; both actions are audited without the secret."""

from __future__ import annotations

from tests.identity.conftest import Site


async def test_a_member_creates_lists_uses_and_revokes_their_own_key(site: Site) -> None:
    alice, bob = await site.sign_in("alice"), await site.sign_in("bob")
    created = await alice.post(
        "/api/keys",
        json={
            "name": "laptop",
            "models": ["scripted:echo"],
            "requestsPerMinute": 5,
            "tokensPerDay": 1000,
        },
    )
    assert created.status_code == 201, created.text
    key = created.json()
    plaintext = key["key"]
    assert plaintext.startswith("drp_") and len(plaintext) == 36
    assert plaintext.startswith(key["prefix"])
    assert key["models"] == ["scripted:echo"] and key["agents"] is None
    assert (key["requestsPerMinute"], key["tokensPerDay"]) == (5, 1000)
    assert key["ownerName"] == "alice" and key["revoked"] is False
    stored = await site.runtime.db.api_keys.list()
    alice_id = (await alice.get("/api/auth/me")).json()["user"]["id"]
    assert [(r.id, r.owner_id) for r in stored] == [(key["id"], alice_id)]

    listed = (await alice.get("/api/keys")).json()["items"]
    assert [k["id"] for k in listed] == [key["id"]]
    assert plaintext not in (await alice.get("/api/keys")).text  # shown once only
    assert (await bob.get("/api/keys")).json()["items"] == []

    async with site.client() as gateway:
        used = await gateway.post(
            "/v1/chat/completions",
            headers={"authorization": f"Bearer {plaintext}"},
            json={"model": "scripted:echo", "messages": [{"role": "user", "content": "ping"}]},
        )
        assert used.status_code == 200, used.text
        other = await gateway.post(
            "/v1/chat/completions",
            headers={"authorization": f"Bearer {plaintext}"},
            json={"model": "scripted:other", "messages": [{"role": "user", "content": "x"}]},
        )
        assert other.status_code in (403, 404), other.text  # outside the key's models

    assert (await bob.delete(f"/api/keys/{key['id']}")).status_code == 404
    assert (await alice.get("/api/keys")).json()["items"][0]["revoked"] is False
    revoked = await alice.delete(f"/api/keys/{key['id']}")
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["revoked"] is True and revoked.json()["revokedAt"]
    assert (await site.runtime.db.api_keys.list())[0].revoked_at is not None
    assert (await alice.delete("/api/keys/key_nothing")).status_code == 404


async def test_an_admin_sees_every_key_with_its_owner_and_may_revoke_it(site: Site) -> None:
    alice, root = await site.sign_in("alice"), await site.sign_in("root")
    alice_key = (await alice.post("/api/keys", json={"name": "alice's"})).json()
    root_key = (await root.post("/api/keys", json={"name": "root's"})).json()
    listed = (await root.get("/api/keys")).json()["items"]
    assert {(k["id"], k["ownerName"]) for k in listed} == {
        (alice_key["id"], "alice"),
        (root_key["id"], "root"),
    }
    assert [k["id"] for k in (await alice.get("/api/keys")).json()["items"]] == [alice_key["id"]]
    assert (await root.delete(f"/api/keys/{alice_key['id']}")).status_code == 200

    events = (await root.get("/api/audit", params={"limit": 50})).json()["items"]
    key_events = [
        (e["action"], e["actorName"], e["target"]) for e in events if "key" in e["action"]
    ]
    assert sorted(key_events) == sorted(
        [
            ("key.create", "alice", alice_key["id"]),
            ("key.create", "root", root_key["id"]),
            ("key.revoke", "root", alice_key["id"]),
        ]
    )
    audit_text = (await root.get("/api/audit", params={"limit": 50})).text
    assert alice_key["key"] not in audit_text and root_key["key"] not in audit_text


async def test_bad_key_requests_are_422_that_say_what_is_wrong(site: Site) -> None:
    alice = await site.sign_in("alice")
    for body in (
        {},
        {"name": ""},
        {"name": "x", "requestsPerMinute": 0},
        {"name": "x", "tokensPerDay": -5},
        {"name": "x", "models": [""]},
        {"name": "x", "models": ["m"] * 101},
    ):
        reply = await alice.post("/api/keys", json=body)
        assert reply.status_code == 422, (body, reply.text)
    assert (await alice.get("/api/keys")).json()["items"] == []
