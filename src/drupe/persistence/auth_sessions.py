"""``AuthSessionStore``: signed-in browser sessions and one-time sign-in links, in the database
(so every cluster node accepts them).

Contract:

* ``create(user_id, method, ttl)`` returns the cookie value (shown once: 32 random URL-safe
  bytes) and the session; the database keeps only the value's SHA-256 and a random CSRF token.
* ``resolve(value)`` returns the live session and its enabled user, or None (unknown, expired,
  revoked, or the user disabled): one read.
* ``revoke(value)`` (sign out) and ``revoke_user(user_id)`` end sessions at once in the
  database; nodes that cached a lookup drop it within their cache lifetime.
* An OIDC sign-in's ID token (``create(..., id_token=)``) is kept sealed
  (``drupe.persistence.secret_box``) for the sign-out at the provider: ``revoke`` returns it
  (``AuthSession.id_token``, never in a ``repr``) and deletes it from the row; ``revoke_user``
  deletes it too. No other read returns it. ``reseal_id_tokens()`` re-seals the live sessions'
  ID tokens under the current secret key (a rotation; the runtime calls it at start).
* ``still_valid(session_ids)`` is the subset of sessions that are live with an enabled user:
  one query for the revocation sweep over every open stream.
* A sign-in link (``create_link``) is good once, before it expires; ``use_link`` marks it used
  and returns its enabled user.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Final

from sqlalchemy import select, update

from drupe.persistence.clock import utc_now
from drupe.persistence.secret_box import SecretBox, SecretUnreadable
from drupe.persistence.tables import AuthSessionRow, SignInLinkRow, UserRow
from drupe.persistence.transaction import Transactions
from drupe.persistence.users import UserRecord, user_record

__all__ = ["MAX_COOKIE_CHARS", "AuthSession", "AuthSessionStore", "hash_secret"]

MAX_COOKIE_CHARS: Final = 128


def hash_secret(value: str) -> str:
    """The SHA-256 (hex) a secret is stored and looked up by."""
    return hashlib.sha256(value.encode()).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthSession:
    id: str
    user_id: str
    csrf_token: str
    created_at: datetime
    expires_at: datetime
    method: str
    id_token: str | None = field(default=None, repr=False)
    """Only on the record ``revoke`` returns: the OIDC sign-in's ID token (else None)."""


def _session(row: AuthSessionRow) -> AuthSession:
    return AuthSession(
        id=row.id,
        user_id=row.user_id,
        csrf_token=row.csrf_token,
        created_at=row.created_at,
        expires_at=row.expires_at,
        method=row.method,
    )


class AuthSessionStore:
    def __init__(self, transactions: Transactions, secrets: SecretBox) -> None:
        self._transactions = transactions
        self._secrets = secrets

    async def create(
        self, user_id: str, *, method: str, ttl: float, id_token: str | None = None
    ) -> tuple[str, AuthSession]:
        value = secrets.token_urlsafe(32)
        now = utc_now()
        row = AuthSessionRow(
            id=f"ses_{uuid.uuid4().hex}",
            token_hash=hash_secret(value),
            user_id=user_id,
            csrf_token=secrets.token_urlsafe(24),
            created_at=now,
            expires_at=now + timedelta(seconds=ttl),
            revoked_at=None,
            method=method,
            id_token=None if id_token is None else self._secrets.seal(id_token),
        )
        async with self._transactions.write() as db:
            db.add(row)
        return value, _session(row)

    async def resolve(self, value: str) -> tuple[AuthSession, UserRecord] | None:
        if not value or len(value) > MAX_COOKIE_CHARS:
            return None
        async with self._transactions.read() as db:
            found = (
                await db.execute(
                    select(AuthSessionRow, UserRow)
                    .join(UserRow, UserRow.id == AuthSessionRow.user_id)
                    .where(AuthSessionRow.token_hash == hash_secret(value))
                )
            ).first()
        if found is None:
            return None
        session, user = found
        if session.revoked_at is not None or session.expires_at <= utc_now() or user.disabled:
            return None
        return _session(session), user_record(user)

    async def revoke(self, value: str) -> AuthSession | None:
        """End the session whose cookie is ``value``; its record (None: there was none)."""
        async with self._transactions.write() as db:
            row = await db.scalar(
                select(AuthSessionRow).where(AuthSessionRow.token_hash == hash_secret(value))
            )
            if row is None:
                return None
            if row.revoked_at is None:
                row.revoked_at = utc_now()
            sealed, row.id_token = row.id_token, None
        id_token = None
        if sealed is not None:
            try:
                id_token = self._secrets.open(sealed)
            except SecretUnreadable:
                id_token = None  # sealed under another key: sign out here only
        return replace(_session(row), id_token=id_token)

    async def revoke_user(self, user_id: str) -> int:
        """End every live session of the user; how many were ended."""
        async with self._transactions.write() as db:
            result = await db.execute(
                update(AuthSessionRow)
                .where(AuthSessionRow.user_id == user_id, AuthSessionRow.revoked_at.is_(None))
                .values(revoked_at=utc_now(), id_token=None)
            )
            return int(getattr(result, "rowcount", 0) or 0)

    async def reseal_id_tokens(self, *, dry_run: bool = False) -> int:
        """Seal the live sessions' ID tokens under the current secret key; how many changed
        (``dry_run``: would change, counted in a read transaction that locks nothing). One no
        key opens is left (its sign-out at the provider is skipped)."""
        live = select(AuthSessionRow).where(
            AuthSessionRow.id_token.is_not(None),
            AuthSessionRow.revoked_at.is_(None),
            AuthSessionRow.expires_at > utc_now(),
        )
        transaction = self._transactions.read() if dry_run else self._transactions.write()
        async with transaction as db:
            rows = await db.scalars(live if dry_run else live.with_for_update())
            resealed = 0
            for row in rows:
                assert row.id_token is not None
                try:
                    fresh = self._secrets.reseal(row.id_token)
                except SecretUnreadable:
                    continue
                if fresh is not None:
                    resealed += 1
                    if not dry_run:
                        row.id_token = fresh
        return resealed

    async def still_valid(self, session_ids: Iterable[str]) -> set[str]:
        ids = list(session_ids)
        if not ids:
            return set()
        now = utc_now()
        async with self._transactions.read() as db:
            rows = await db.execute(
                select(AuthSessionRow.id)
                .join(UserRow, UserRow.id == AuthSessionRow.user_id)
                .where(
                    AuthSessionRow.id.in_(ids),
                    AuthSessionRow.revoked_at.is_(None),
                    AuthSessionRow.expires_at > now,
                    UserRow.disabled.is_(False),
                )
            )
            return {row[0] for row in rows}

    async def create_link(self, user_id: str, *, ttl: float) -> str:
        value = secrets.token_urlsafe(32)
        async with self._transactions.write() as db:
            db.add(
                SignInLinkRow(
                    token_hash=hash_secret(value),
                    user_id=user_id,
                    expires_at=utc_now() + timedelta(seconds=ttl),
                    used_at=None,
                )
            )
        return value

    async def use_link(self, value: str) -> UserRecord | None:
        if not value or len(value) > MAX_COOKIE_CHARS:
            return None
        async with self._transactions.write() as db:
            link = await db.get(SignInLinkRow, hash_secret(value), with_for_update=True)
            if link is None or link.used_at is not None or link.expires_at <= utc_now():
                return None
            link.used_at = utc_now()
            user = await db.get(UserRow, link.user_id)
            if user is None or user.disabled:
                return None
            return user_record(user)
