"""IM accounts linked by their users (``drupe.persistence.chat_links``), on SQLite and PostgreSQL:
a code links once, case- and dash-blind, only before it expires and only for an enabled user;
a new code replaces the user's previous one; a link is a ``user_identities`` row (read here with
plain SQL); a user unlinks only their own accounts."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from drupe.errors import ValidationError
from drupe.persistence import open_database
from drupe.persistence.db import Database
from tests.persistence.conftest import Target

pytestmark = pytest.mark.anyio


async def _identities(db: Database) -> list[tuple[str, str, str]]:
    async with db.transactions.read() as session:
        rows = await session.execute(
            text("SELECT issuer, subject, user_id FROM user_identities ORDER BY issuer, subject")
        )
        return [(str(a), str(b), str(c)) for a, b, c in rows.all()]


async def _codes_stored(db: Database) -> list[str]:
    async with db.transactions.read() as session:
        return [
            str(r[0])
            for r in (await session.execute(text("SELECT code_hash FROM chat_link_codes"))).all()
        ]


async def test_a_code_links_the_account_that_sends_it_once(target: Target, tmp_path: Path) -> None:
    async with open_database(target.url, data_dir=tmp_path, connect_args=target.connect_args) as db:
        alice = await db.users.create("alice", password="alice-password-1")
        bob = await db.users.create("bob", password="bob-password-22")
        links = db.chat_links

        code, expires_at = await links.make_code(alice.id, ttl=600)
        assert re.fullmatch(r"[A-HJ-NP-Z2-9]{4}-[A-HJ-NP-Z2-9]{4}", code)
        assert timedelta(seconds=590) < expires_at - datetime.now(UTC) <= timedelta(seconds=600)
        stored = await _codes_stored(db)
        assert len(stored) == 1 and code not in stored[0] and code.replace("-", "") not in stored[0]

        # Typed in lower case without the dash, from account 1001 on channel tg.
        user = await links.redeem(
            code.replace("-", "").lower(), channel_id="tg", platform_user_id="1001"
        )
        assert user is not None and user.name == "alice"
        assert await _identities(db) == [("channel:tg", "1001", alice.id)]
        linked = await links.linked_user("tg", "1001")
        assert linked is not None and linked.id == alice.id
        assert await links.linked_user("other", "1001") is None  # per channel
        assert await _codes_stored(db) == []
        # Once only.
        assert await links.redeem(code, channel_id="tg", platform_user_id="2002") is None

        # A new code replaces the user's previous one; another user's code links them instead.
        first, _ = await links.make_code(bob.id, ttl=600)
        second, _ = await links.make_code(bob.id, ttl=600)
        assert len(await _codes_stored(db)) == 1
        assert await links.redeem(first, channel_id="tg", platform_user_id="1001") is None
        relinked = await links.redeem(second, channel_id="tg", platform_user_id="1001")
        assert relinked is not None and relinked.id == bob.id
        assert await _identities(db) == [("channel:tg", "1001", bob.id)]

        # Listing and unlinking are the user's own.
        assert [(a.channel_id, a.platform_user_id) for a in await links.accounts(bob.id)] == [
            ("tg", "1001")
        ]
        assert await links.accounts(alice.id) == []
        assert not await links.unlink("tg", "1001", user_id=alice.id)
        assert await links.unlink("tg", "1001", user_id=bob.id)
        assert await _identities(db) == []
        assert not await links.unlink("tg", "1001")


async def test_an_expired_code_or_a_disabled_user_links_nothing(
    target: Target, tmp_path: Path
) -> None:
    async with open_database(target.url, data_dir=tmp_path, connect_args=target.connect_args) as db:
        carol = await db.users.create("carol", password="carol-password-4")
        expired, _ = await db.chat_links.make_code(carol.id, ttl=-1)
        assert await db.chat_links.redeem(expired, channel_id="tg", platform_user_id="7") is None
        assert await _codes_stored(db) == []  # dropped, not kept for another try

        code, _ = await db.chat_links.make_code(carol.id, ttl=600)
        await db.users.set_disabled("carol")
        assert await db.chat_links.redeem(code, channel_id="tg", platform_user_id="7") is None
        assert await _identities(db) == []
        for junk in ("", "x" * 100, "not-a-code"):
            assert await db.chat_links.redeem(junk, channel_id="tg", platform_user_id="7") is None

        # An id too long for the column is refused by name, and the code is still good.
        await db.users.set_disabled("carol", False)
        code, _ = await db.chat_links.make_code(carol.id, ttl=600)
        with pytest.raises(ValidationError, match="longer than 255"):
            await db.chat_links.redeem(code, channel_id="hook", platform_user_id="u" * 256)
        assert await db.chat_links.redeem(code, channel_id="hook", platform_user_id="u" * 255)
