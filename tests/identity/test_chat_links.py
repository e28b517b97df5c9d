"""Linking an IM account to oneself, end to end: a real server with auth on, a Telegram channel
from config.toml on the loopback fake of the Bot API, signed-in ``httpx`` clients.

alice makes a code in the web API and sends ``/link <code>`` from her Telegram account; from
then on her chats act as alice (the channel's ``run_as`` is bob), in a conversation of hers;
the code works once; bob cannot unlink her account; when she unlinks it in the web API, her next
message goes on as bob again, in a new conversation of bob's (not refused, not in alice's)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from drupe.api.app_factory import create_app
from drupe.app import Runtime, open_runtime
from drupe.settings import Settings
from drupe.testing.fake_telegram import FakeTelegram, fake_telegram
from drupe.testing.loopback import serve_app
from tests.channels.conftest import ALICE, CHAT_A, TG_TOKEN
from tests.identity.conftest import PASSWORDS, Site

pytestmark = pytest.mark.anyio


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with fake_telegram() as fake:
        yield fake


@pytest.fixture
async def site(
    tmp_path: Path, tg: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Site]:
    monkeypatch.setenv("TG_TOKEN", TG_TOKEN)
    config = tmp_path / "config.toml"
    config.write_text(
        'default_model = "scripted:echo"\n'
        "[channels.tg]\n"
        'type = "telegram"\ntoken_env = "TG_TOKEN"\ntarget = "model:scripted:echo"\n'
        f'base_url = "{tg.base_url}"\ndebounce = 0\nrun_as = "bob"\n'
        f'allowed_users = ["{ALICE}"]\n'
    )
    async with open_runtime(Settings(data_dir=tmp_path, config_path=config)) as runtime:
        await runtime.db.users.create("root", password=PASSWORDS["root"], role="admin")
        await runtime.db.users.create("alice", password=PASSWORDS["alice"])
        await runtime.db.users.create("bob", password=PASSWORDS["bob"])
        async with serve_app(create_app(runtime)) as url:
            site = Site(url, runtime)
            try:
                yield site
            finally:
                for client in site.clients.values():
                    await client.aclose()


async def _say(runtime: Runtime, tg: FakeTelegram, text: str, expect: str) -> str:
    """Send ``text`` from alice's Telegram account; the first new bot message holding ``expect``."""
    before = len(tg.messages(CHAT_A))
    tg.push_message(CHAT_A, ALICE, text)
    await tg.recorder.wait_until(lambda: any(expect in t for t in tg.messages(CHAT_A)[before:]))
    assert runtime.channels is not None
    await runtime.channels.channels["tg"].outboxes[str(CHAT_A)].wait_idle()
    return next(t for t in tg.messages(CHAT_A)[before:] if expect in t)


async def _chat_owner(runtime: Runtime) -> str | None:
    binding = await runtime.db.channels.binding("tg", str(CHAT_A))
    assert binding is not None
    record = await runtime.db.conversations.get(binding.conversation_id)
    assert record is not None
    return record.owner_id


async def test_a_user_links_their_chat_account_and_unlinks_it(site: Site, tg: FakeTelegram) -> None:
    runtime = site.runtime
    alice, bob, root = [await site.sign_in(n) for n in ("alice", "bob", "root")]
    alice_id = (await alice.get("/api/auth/me")).json()["user"]["id"]
    bob_id = (await bob.get("/api/auth/me")).json()["user"]["id"]

    listed = await alice.get("/api/auth/chat-accounts")
    assert listed.status_code == 200, listed.text
    assert listed.json() == {
        "accounts": [],
        "channels": [{"id": "tg", "type": "telegram", "linkCommand": "/link"}],
    }

    # Before any link the chat acts as the channel's run_as user.
    await _say(runtime, tg, "before the link", "before the link")
    assert await _chat_owner(runtime) == bob_id
    first_conversation = (await runtime.db.channels.binding("tg", str(CHAT_A))).conversation_id  # type: ignore[union-attr]

    made = await alice.post("/api/auth/chat-accounts/code")
    assert made.status_code == 201, made.text
    code = made.json()["code"]
    assert (
        re.fullmatch(r"[A-Z2-9]{4}-[A-Z2-9]{4}", code) and made.json()["command"] == f"/link {code}"
    )

    reply = await _say(runtime, tg, f"/link {code.replace('-', '').lower()}", "Linked")
    assert "alice" in reply
    await _say(runtime, tg, "after the link", "after the link")
    assert await _chat_owner(runtime) == alice_id
    whoami = await _say(runtime, tg, "/whoami", "Your user ID")
    assert "alice" in whoami
    # bob's conversation of before is still bob's, and alice's chat is not in it.
    record = await runtime.db.conversations.get(first_conversation)
    assert record is not None and record.owner_id == bob_id

    accounts = (await alice.get("/api/auth/chat-accounts")).json()["accounts"]
    assert [(a["channel"], a["platformUserId"]) for a in accounts] == [("tg", str(ALICE))]
    assert (await bob.get("/api/auth/chat-accounts")).json()["accounts"] == []

    # An admin sees it on alice's row of the users list (and a member cannot list users).
    users = (await root.get("/api/users")).json()["items"]
    rows = {u["name"]: u["chatAccounts"] for u in users}
    assert rows["alice"] == [{"channel": "tg", "platformUserId": str(ALICE)}]
    assert rows["bob"] == [] and rows["root"] == []
    assert (await bob.get("/api/users")).status_code == 403

    # The code works once.
    assert "unknown or expired" in await _say(runtime, tg, f"/link {code}", "unknown or expired")

    # Only the account's user unlinks it in the web API.
    assert (await bob.delete(f"/api/auth/chat-accounts/tg/{ALICE}")).status_code == 404
    gone = await alice.delete(f"/api/auth/chat-accounts/tg/{ALICE}")
    assert gone.status_code == 204, gone.text
    assert (await alice.get("/api/auth/chat-accounts")).json()["accounts"] == []

    # The next message acts as bob again: answered, in a conversation of bob's.
    await _say(runtime, tg, "after the unlink", "after the unlink")
    assert await _chat_owner(runtime) == bob_id

    audit = await root.get("/api/audit", params={"limit": 50})
    actions = [e["action"] for e in audit.json()["items"]]
    assert {"chat.link_code", "chat.link", "chat.unlink"} <= set(actions)
    assert code not in audit.text and code.replace("-", "") not in audit.text


async def test_an_admin_unlinks_a_users_chat_account(site: Site, tg: FakeTelegram) -> None:
    runtime = site.runtime
    alice, bob, root = [await site.sign_in(n) for n in ("alice", "bob", "root")]
    code = (await alice.post("/api/auth/chat-accounts/code")).json()["code"]
    await _say(runtime, tg, f"/link {code}", "Linked")
    path = f"/api/users/alice/chat-accounts/tg/{ALICE}"
    assert (await bob.delete(path)).status_code == 403  # members: not theirs to manage
    assert (await root.delete(f"/api/users/bob/chat-accounts/tg/{ALICE}")).status_code == 404
    gone = await root.delete(path)
    assert gone.status_code == 204, gone.text
    assert (await alice.get("/api/auth/chat-accounts")).json()["accounts"] == []
    assert (await root.delete(path)).status_code == 404  # once
    events = (await root.get("/api/audit", params={"action": "chat.unlink"})).json()["items"]
    assert [(e["actorName"], e["detail"]["user"]) for e in events] == [("root", "alice")]
    # The account's chats act as the channel's run_as user again.
    bob_id = (await bob.get("/api/auth/me")).json()["user"]["id"]
    await _say(runtime, tg, "after the admin", "after the admin")
    assert await _chat_owner(runtime) == bob_id


async def test_an_account_id_with_a_slash_is_unlinked_by_its_path(site: Site) -> None:
    """A webhook bridge's user ids may hold ``/``: the id is the rest of the path."""
    alice, root = await site.sign_in("alice"), await site.sign_in("root")
    links = site.runtime.db.chat_links
    for by_admin in (False, True):
        code = (await alice.post("/api/auth/chat-accounts/code")).json()["code"]
        linked = await links.redeem(code, channel_id="hook", platform_user_id="room/7 ada")
        assert linked is not None and linked.name == "alice"
        accounts = (await alice.get("/api/auth/chat-accounts")).json()["accounts"]
        assert [a["platformUserId"] for a in accounts] == ["room/7 ada"]
        if by_admin:
            gone = await root.delete("/api/users/alice/chat-accounts/hook/room%2F7%20ada")
        else:
            gone = await alice.delete("/api/auth/chat-accounts/hook/room%2F7%20ada")
        assert gone.status_code == 204, gone.text
        assert await links.linked_user("hook", "room/7 ada") is None


async def test_unlink_from_the_chat_and_a_code_needs_a_signed_in_user(
    site: Site, tg: FakeTelegram
) -> None:
    runtime = site.runtime
    alice = await site.sign_in("alice")
    code = (await alice.post("/api/auth/chat-accounts/code")).json()["code"]
    await _say(runtime, tg, f"/link {code}", "Linked")
    reply = await _say(runtime, tg, "/unlink", "Unlinked")
    assert "alice" in reply
    assert (await alice.get("/api/auth/chat-accounts")).json()["accounts"] == []
    assert "not linked" in await _say(runtime, tg, "/unlink", "not linked")

    async with site.client(headers={"origin": site.url}) as anon:
        assert (await anon.post("/api/auth/chat-accounts/code")).status_code == 401
        assert (await anon.get("/api/auth/chat-accounts")).status_code == 401


def test_slack_takes_the_link_command_after_its_slash_command() -> None:
    """Slack keeps messages that start with ``/`` for its own commands."""
    from drupe.api.chat_account_routes import link_command
    from drupe.channels.config import parse_channel_configs

    env = {"SLACK_TOKEN": "xoxb-1", "SLACK_SECRET": "s" * 24, "TG_TOKEN": TG_TOKEN}
    configs = parse_channel_configs(
        {
            "channels": {
                "team": {
                    "type": "slack",
                    "token_env": "SLACK_TOKEN",
                    "secret_env": "SLACK_SECRET",
                    "target": "model:scripted:echo",
                    "slash_command": "/ask",
                },
                "tg": {
                    "type": "telegram",
                    "token_env": "TG_TOKEN",
                    "target": "model:scripted:echo",
                },
            }
        },
        env,
    )
    assert {c.id: link_command(c) for c in configs} == {"team": "/ask link", "tg": "/link"}
