"""``UserStore``: the people who sign in, their roles, and their personal API tokens.

Contract (issue 20, step 1: the accounts; sign-in and enforcement build on it):

* A user has a unique ``name`` (1 to 64 letters, digits, ``.``, ``_``, ``-``), an optional
  e-mail, a role (``admin`` | ``member``), a ``disabled`` flag and the argon2id hash of its
  password (``argon2-cffi``; no hand-written crypto). A password is 8 to 1,024 characters.
* ``authenticate(name, password)`` returns the enabled user whose password matches, else None;
  an unknown name verifies against a dummy hash, so both refusals cost the same time (no user
  enumeration). A hash made with older parameters is upgraded on a successful sign-in.
* A personal token is ``drt_`` followed by 32 random URL-safe characters; ``create_token``
  returns the plaintext once, the database keeps its SHA-256 and a short prefix. At most
  ``MAX_TOKENS_PER_USER`` live tokens per user. ``verify_token`` refuses revoked tokens and the
  tokens of a disabled user, and stamps ``last_used_at``.
* ``change(name, role=, disabled=)`` never leaves the server without an enabled admin.
* No password, hash or token is ever put in an exception message or a record's ``repr``.
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import re
import secrets
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Literal

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from sqlalchemy import func, select, update

from drupe.errors import NotFoundError, ValidationError
from drupe.persistence.clock import utc_now
from drupe.persistence.tables import UserRow, UserTokenRow
from drupe.persistence.transaction import Transactions

__all__ = [
    "MAX_PASSWORD_CHARS",
    "MAX_TOKENS_PER_USER",
    "MIN_PASSWORD_CHARS",
    "TOKEN_PREFIX",
    "UserRecord",
    "UserStore",
    "UserTokenRecord",
    "user_record",
]

Role = Literal["admin", "member"]
ROLES: Final[tuple[Role, ...]] = ("admin", "member")
MIN_PASSWORD_CHARS: Final = 8
MAX_PASSWORD_CHARS: Final = 1024
MAX_TOKENS_PER_USER: Final = 50
TOKEN_PREFIX: Final = "drt_"
_NAME: Final = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_HASHER: Final = PasswordHasher()


@functools.cache
def _dummy_hash() -> str:
    """What an unknown name's password is verified against (made once, on first use: an
    argon2 hash costs memory and time, so never at import)."""
    return _HASHER.hash(secrets.token_urlsafe(16))


@dataclass(frozen=True, slots=True, kw_only=True)
class UserRecord:
    id: str
    name: str
    email: str | None
    role: Role
    disabled: bool
    created_at: datetime
    has_password: bool = field(default=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class UserTokenRecord:
    id: str
    user_id: str
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


def user_record(row: UserRow) -> UserRecord:
    """The record of a users row (for the stores that join users)."""
    return UserRecord(
        id=row.id,
        name=row.name,
        email=row.email,
        role="admin" if row.role == "admin" else "member",
        disabled=bool(row.disabled),
        created_at=row.created_at,
        has_password=row.password_hash is not None,
    )


def _token(row: UserTokenRow) -> UserTokenRecord:
    return UserTokenRecord(
        id=row.id,
        user_id=row.user_id,
        name=row.name,
        prefix=row.prefix,
        created_at=row.created_at,
        last_used_at=row.last_used_at,
        revoked_at=row.revoked_at,
    )


def _hash_token(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def check_password(password: str) -> None:
    if not MIN_PASSWORD_CHARS <= len(password) <= MAX_PASSWORD_CHARS:
        raise ValidationError(
            f"a password has {MIN_PASSWORD_CHARS} to {MAX_PASSWORD_CHARS} characters"
        )


class UserStore:
    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions

    async def create(
        self,
        name: str,
        *,
        password: str | None,
        role: Role = "member",
        email: str | None = None,
    ) -> UserRecord:
        if not _NAME.match(name):
            raise ValidationError(
                "a user name has 1 to 64 letters, digits, '.', '_' or '-' (no spaces)"
            )
        if role not in ROLES:
            raise ValidationError(f"role must be one of {', '.join(ROLES)}")
        if password is not None:
            check_password(password)
        if email is not None and ("@" not in email or len(email) > 320):
            raise ValidationError("email must look like name@example.org")
        async with self._transactions.write() as db:
            taken = await db.scalar(select(UserRow.id).where(UserRow.name == name))
            if taken is not None:
                raise ValidationError(f"a user named {name!r} exists already")
            row = UserRow(
                id=f"usr_{uuid.uuid4().hex}",
                name=name,
                email=email,
                role=role,
                disabled=False,
                password_hash=_HASHER.hash(password) if password is not None else None,
                created_at=utc_now(),
            )
            db.add(row)
        return user_record(row)

    async def list_users(self) -> builtins.list[UserRecord]:
        async with self._transactions.read() as db:
            rows = (await db.scalars(select(UserRow).order_by(UserRow.created_at))).all()
            return [user_record(row) for row in rows]

    async def count(self) -> int:
        async with self._transactions.read() as db:
            return int(await db.scalar(select(func.count()).select_from(UserRow)) or 0)

    async def get(self, user_id: str) -> UserRecord | None:
        async with self._transactions.read() as db:
            row = await db.get(UserRow, user_id)
            return user_record(row) if row is not None else None

    async def first_admin(self) -> UserRecord | None:
        """The earliest-created enabled admin (the owner of rows from before identity)."""
        async with self._transactions.read() as db:
            row = await db.scalar(
                select(UserRow)
                .where(UserRow.role == "admin", UserRow.disabled.is_(False))
                .order_by(UserRow.created_at, UserRow.id)
                .limit(1)
            )
            return user_record(row) if row is not None else None

    async def get_by_name(self, name: str) -> UserRecord | None:
        async with self._transactions.read() as db:
            row = await db.scalar(select(UserRow).where(UserRow.name == name))
            return user_record(row) if row is not None else None

    async def _require(self, name: str) -> UserRecord:
        user = await self.get_by_name(name)
        if user is None:
            raise NotFoundError("user", name)
        return user

    async def set_disabled(self, name: str, disabled: bool = True) -> UserRecord:
        user = await self._require(name)
        async with self._transactions.write() as db:
            await db.execute(update(UserRow).where(UserRow.id == user.id).values(disabled=disabled))
        return await self._require(name)

    async def set_role(self, name: str, role: Role) -> UserRecord:
        if role not in ROLES:
            raise ValidationError(f"role must be one of {', '.join(ROLES)}")
        user = await self._require(name)
        async with self._transactions.write() as db:
            await db.execute(update(UserRow).where(UserRow.id == user.id).values(role=role))
        return await self._require(name)

    async def change(
        self, name: str, *, role: Role | None = None, disabled: bool | None = None
    ) -> tuple[UserRecord, UserRecord]:
        """Set the role and/or the disabled flag of user ``name``: ``(before, after)``.

        Refuses (``ValidationError``) to leave the server without an enabled admin: the check
        and the change are one transaction, and on Postgres the admin rows are locked, so two
        admins demoting each other at once cannot both succeed.
        """
        if role is not None and role not in ROLES:
            raise ValidationError(f"role must be one of {', '.join(ROLES)}")
        async with self._transactions.write() as db:
            # Lock the enabled admins first, always in id order, then the user: two changes
            # at once wait for each other instead of deadlocking (Postgres; SQLite has one
            # writer).
            admins = (
                await db.scalars(
                    select(UserRow.id)
                    .where(UserRow.role == "admin", UserRow.disabled.is_(False))
                    .order_by(UserRow.id)
                    .with_for_update()
                )
            ).all()
            row = await db.scalar(select(UserRow).where(UserRow.name == name).with_for_update())
            if row is None:
                raise NotFoundError("user", name)
            before = user_record(row)
            new_role = role if role is not None else before.role
            new_disabled = disabled if disabled is not None else before.disabled
            stays_admin = new_role == "admin" and not new_disabled
            if before.id in admins and not stays_admin and len(admins) <= 1:
                raise ValidationError(
                    f"{name!r} is the last enabled admin: make another user an admin "
                    "before demoting or disabling this one"
                )
            row.role = new_role
            row.disabled = new_disabled
            return before, user_record(row)

    async def authenticate(self, name: str, password: str) -> UserRecord | None:
        """The enabled user ``name`` when ``password`` matches; None otherwise, in the same
        time for an unknown name (a dummy hash is verified)."""
        if len(password) > MAX_PASSWORD_CHARS:
            return None
        async with self._transactions.read() as db:
            row = await db.scalar(select(UserRow).where(UserRow.name == name))
        stored = row.password_hash if row is not None else None
        try:
            _HASHER.verify(stored or _dummy_hash(), password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return None
        if row is None or stored is None or row.disabled:
            return None
        if _HASHER.check_needs_rehash(stored):
            async with self._transactions.write() as db:
                await db.execute(
                    update(UserRow)
                    .where(UserRow.id == row.id)
                    .values(password_hash=_HASHER.hash(password))
                )
        return user_record(row)

    async def create_token(self, name: str, label: str = "token") -> tuple[str, UserTokenRecord]:
        """A new personal token of user ``name``: the plaintext (shown once) and its record."""
        user = await self._require(name)
        plaintext = TOKEN_PREFIX + secrets.token_urlsafe(24)
        async with self._transactions.write() as db:
            live = await db.scalar(
                select(func.count())
                .select_from(UserTokenRow)
                .where(UserTokenRow.user_id == user.id, UserTokenRow.revoked_at.is_(None))
            )
            if int(live or 0) >= MAX_TOKENS_PER_USER:
                raise ValidationError(
                    f"user {name!r} has {MAX_TOKENS_PER_USER} live tokens; revoke one first"
                )
            row = UserTokenRow(
                id=f"tok_{uuid.uuid4().hex}",
                user_id=user.id,
                name=label,
                prefix=plaintext[: len(TOKEN_PREFIX) + 8],
                token_hash=_hash_token(plaintext),
                created_at=utc_now(),
                last_used_at=None,
                revoked_at=None,
            )
            db.add(row)
        return plaintext, _token(row)

    async def verify_token(self, plaintext: str) -> UserRecord | None:
        """The enabled user a live token belongs to (None: unknown, revoked or disabled)."""
        found = await self.resolve_token(plaintext)
        return found[1] if found is not None else None

    async def resolve_token(self, plaintext: str) -> tuple[UserTokenRecord, UserRecord] | None:
        """The live token and its enabled user (None: unknown, revoked or disabled)."""
        if not plaintext.startswith(TOKEN_PREFIX) or len(plaintext) > 128:
            return None
        async with self._transactions.write() as db:
            token = await db.scalar(
                select(UserTokenRow).where(UserTokenRow.token_hash == _hash_token(plaintext))
            )
            if token is None or token.revoked_at is not None:
                return None
            user = await db.get(UserRow, token.user_id)
            if user is None or user.disabled:
                return None
            token.last_used_at = utc_now()
            return _token(token), user_record(user)

    async def tokens_still_valid(self, token_ids: builtins.list[str]) -> set[str]:
        """The subset of ``token_ids`` that are live tokens of enabled users (one query)."""
        if not token_ids:
            return set()
        async with self._transactions.read() as db:
            rows = await db.execute(
                select(UserTokenRow.id)
                .join(UserRow, UserRow.id == UserTokenRow.user_id)
                .where(
                    UserTokenRow.id.in_(token_ids),
                    UserTokenRow.revoked_at.is_(None),
                    UserRow.disabled.is_(False),
                )
            )
            return {row[0] for row in rows}

    async def enabled_among(self, user_ids: builtins.list[str]) -> set[str]:
        """The subset of ``user_ids`` that are enabled users (one query)."""
        if not user_ids:
            return set()
        async with self._transactions.read() as db:
            rows = await db.execute(
                select(UserRow.id).where(UserRow.id.in_(user_ids), UserRow.disabled.is_(False))
            )
            return {row[0] for row in rows}

    async def list_tokens(self, name: str) -> builtins.list[UserTokenRecord]:
        user = await self._require(name)
        async with self._transactions.read() as db:
            rows = (
                await db.scalars(
                    select(UserTokenRow)
                    .where(UserTokenRow.user_id == user.id)
                    .order_by(UserTokenRow.created_at)
                )
            ).all()
            return [_token(row) for row in rows]

    async def revoke_token(self, token_id: str) -> UserTokenRecord:
        async with self._transactions.write() as db:
            row = await db.get(UserTokenRow, token_id)
            if row is None:
                raise NotFoundError("token", token_id)
            if row.revoked_at is None:
                row.revoked_at = utc_now()
            return _token(row)
