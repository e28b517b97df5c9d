"""API keys: only the SHA-256 is stored; verify stamps use; revoke by id or prefix."""

from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import text

from drupe.errors import UsageError, ValidationError
from drupe.persistence import Database


async def test_keys_are_stored_hashed(database: Database) -> None:
    plaintext, record = await database.api_keys.create("ci bot")

    assert plaintext.startswith("drp_") and len(plaintext) == 36
    assert plaintext[4:].replace("-", "").replace("_", "").isalnum()
    assert plaintext.startswith(record.prefix) and len(record.prefix) < len(plaintext)
    async with database.engine.connect() as conn:
        rows = (await conn.execute(text("SELECT * FROM api_keys"))).all()
    assert len(rows) == 1
    stored = [str(value) for value in rows[0]]
    assert hashlib.sha256(plaintext.encode()).hexdigest() in stored
    assert not any(plaintext in value or plaintext[4:] in value for value in stored)


async def test_verify_updates_last_used_and_rejects_unknown(database: Database) -> None:
    plaintext, record = await database.api_keys.create("tool")
    assert record.last_used_at is None

    verified = await database.api_keys.verify(plaintext)
    assert verified is not None and verified.id == record.id
    assert verified.last_used_at is not None and verified.last_used_at >= record.created_at
    later = await database.api_keys.verify(plaintext)
    assert later is not None and later.last_used_at is not None
    assert later.last_used_at > verified.last_used_at

    wrong = plaintext[:-1] + ("A" if plaintext[-1] != "A" else "B")
    assert await database.api_keys.verify(wrong) is None
    assert await database.api_keys.verify("not-a-key") is None
    assert await database.api_keys.verify("") is None


async def test_revoke_by_id_or_prefix(database: Database) -> None:
    first_key, first = await database.api_keys.create("first")
    second_key, second = await database.api_keys.create("second")

    revoked = await database.api_keys.revoke(first.prefix)
    assert revoked.id == first.id and revoked.is_revoked
    assert await database.api_keys.verify(first_key) is None
    assert await database.api_keys.verify(second_key) is not None

    again = await database.api_keys.revoke(first.id)
    assert again.revoked_at == revoked.revoked_at  # revoking twice keeps the first time
    await database.api_keys.revoke(second.id)
    assert await database.api_keys.verify(second_key) is None

    listed = await database.api_keys.list()
    assert [k.name for k in listed] == ["first", "second"]
    assert all(k.is_revoked for k in listed)
    with pytest.raises(UsageError, match="no API key"):
        await database.api_keys.revoke("drp_missing")
    with pytest.raises(ValidationError):
        await database.api_keys.create("  ")
