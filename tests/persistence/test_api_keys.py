"""API keys: only the SHA-256 is stored; verify stamps use; revoke by id or prefix."""

from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import text

from drupe.errors import UsageError, ValidationError
from drupe.persistence import Database
from drupe.persistence.records import KeyScopes


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


async def test_scopes_and_budgets_are_kept_with_the_key(database: Database) -> None:
    scopes = KeyScopes(
        models=["scripted:echo", "fake:*"], agents=["a1"], requests_per_minute=5, tokens_per_day=9
    )
    plaintext, created = await database.api_keys.create("scoped", scopes)
    verified = await database.api_keys.verify(plaintext)
    assert verified is not None
    assert verified.allowed_models == ("scripted:echo", "fake:*")
    assert verified.allowed_agents == ("a1",)
    assert (verified.requests_per_minute, verified.tokens_per_day) == (5, 9)
    _, plain = await database.api_keys.create("plain")
    assert (plain.allowed_models, plain.allowed_agents) == (None, None)
    assert (plain.requests_per_minute, plain.tokens_per_day) == (None, None)
    with pytest.raises(ValidationError, match="requests per minute must be a positive"):
        await database.api_keys.create("bad", KeyScopes(requests_per_minute=0))
    assert created.id == verified.id


async def test_stored_responses_belong_to_their_key(database: Database) -> None:
    body = {"id": "resp_1", "object": "response", "output": []}
    await database.responses.put(
        response_id="resp_1", key_id="key_a", model="m:x", input_items=[{"role": "user"}], body=body
    )
    await database.responses.put(
        response_id="resp_2", key_id=None, model="m:x", input_items=[], body={}
    )
    mine = await database.responses.get("resp_1", "key_a")
    assert mine is not None and mine.body == body and mine.input_items == [{"role": "user"}]
    assert await database.responses.get("resp_1", "key_b") is None
    assert await database.responses.get("resp_1", None) is None
    assert await database.responses.get("resp_2", None) is not None
    assert await database.responses.delete("resp_1", "key_b") is False
    assert await database.responses.delete("resp_1", "key_a") is True
    assert await database.responses.get("resp_1", "key_a") is None
