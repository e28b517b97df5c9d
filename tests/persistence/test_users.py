"""``UserStore`` on SQLite and PostgreSQL (issue 20, step 1): accounts, passwords, tokens.

* The password is stored as an argon2 hash (never the password); sign-in accepts the right
  password only, refuses a disabled user, and refuses an unknown name the same way.
* Names are unique and shaped; passwords and tokens are bounded.
* A token is stored as its SHA-256 only, is verified back to its user, and stops working when
  revoked or when its user is disabled.
"""

from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import select

from drupe.errors import NotFoundError, ValidationError
from drupe.persistence.db import Database
from drupe.persistence.tables import UserRow, UserTokenRow
from drupe.persistence.users import MAX_TOKENS_PER_USER, TOKEN_PREFIX

PASSWORD = "correct horse battery staple"


async def test_passwords_are_hashed_and_sign_in_checks_them(database: Database) -> None:
    users = database.users
    alice = await users.create("alice", password=PASSWORD, role="admin", email="a@example.org")
    async with database.engine.connect() as conn:
        stored = await conn.scalar(select(UserRow.password_hash).where(UserRow.id == alice.id))
    assert stored is not None and stored.startswith("$argon2") and PASSWORD not in stored
    assert (await users.authenticate("alice", PASSWORD)) == alice
    assert await users.authenticate("alice", PASSWORD + "!") is None
    assert await users.authenticate("nobody", PASSWORD) is None
    await users.set_disabled("alice")
    assert await users.authenticate("alice", PASSWORD) is None
    assert (await users.get_by_name("alice")).disabled  # type: ignore[union-attr]


async def test_names_roles_and_passwords_are_checked(database: Database) -> None:
    users = database.users
    await users.create("bob", password=PASSWORD)
    for bad in ("", "has space", "x" * 65, "semi;colon"):
        with pytest.raises(ValidationError, match="user name"):
            await users.create(bad, password=PASSWORD)
    with pytest.raises(ValidationError, match="exists already"):
        await users.create("bob", password=PASSWORD)
    with pytest.raises(ValidationError, match="8 to 1024"):
        await users.create("carol", password="short")
    with pytest.raises(ValidationError, match="8 to 1024"):
        await users.create("carol", password="x" * 1025)
    assert await users.authenticate("bob", "x" * 2000) is None
    assert (await users.set_role("bob", "admin")).role == "admin"
    with pytest.raises(ValidationError, match="role must be one of"):
        await users.set_role("bob", "owner")  # type: ignore[arg-type]
    with pytest.raises(NotFoundError):
        await users.set_role("nobody", "admin")
    assert [u.name for u in await users.list_users()] == ["bob"]


async def test_tokens_are_hashed_verified_revoked_and_bounded(database: Database) -> None:
    users = database.users
    dave = await users.create("dave", password=PASSWORD)
    plaintext, record = await users.create_token("dave", "ci")
    assert plaintext.startswith(TOKEN_PREFIX) and record.prefix == plaintext[: len(record.prefix)]
    async with database.engine.connect() as conn:
        query = select(UserTokenRow.token_hash).where(UserTokenRow.id == record.id)
        stored = await conn.scalar(query)
    assert stored == hashlib.sha256(plaintext.encode()).hexdigest()
    assert (await users.verify_token(plaintext)) == dave
    assert await users.verify_token(plaintext + "x") is None
    assert await users.verify_token("drp_not-a-user-token") is None
    await users.set_disabled("dave")
    assert await users.verify_token(plaintext) is None
    await users.set_disabled("dave", False)
    assert (await users.verify_token(plaintext)) is not None
    await users.revoke_token(record.id)
    assert await users.verify_token(plaintext) is None
    for index in range(MAX_TOKENS_PER_USER):
        await users.create_token("dave", f"t{index}")
    with pytest.raises(ValidationError, match="live tokens"):
        await users.create_token("dave", "one too many")
