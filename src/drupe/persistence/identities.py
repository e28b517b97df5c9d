"""``IdentityStore``: users' accounts at OpenID providers, and sign-ins started at a provider.

Contract:

* ``find(issuer, subject)`` returns the user linked to that provider account (disabled or
  not: the caller refuses a disabled one), or None. ``link`` records the link once; linking an
  account that is linked already keeps the first link (one account is one user).
* ``begin(state, nonce, code_verifier, ttl)`` keeps what the callback needs, in the database
  (any cluster node may receive the callback), keyed by the SHA-256 of ``state``; it also
  drops every expired row, so the table holds only sign-ins in flight.
* ``take(state)`` returns ``(nonce, code_verifier)`` once: the row is deleted in the same
  transaction, so a replayed callback gets None, as do an unknown and an expired state.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from sqlalchemy import delete, select

from drupe.persistence.auth_sessions import hash_secret
from drupe.persistence.clock import utc_now
from drupe.persistence.tables import OidcLoginRow, UserIdentityRow, UserRow
from drupe.persistence.transaction import Transactions
from drupe.persistence.users import UserRecord, user_record

__all__ = ["MAX_STATE_CHARS", "IdentityStore"]

MAX_STATE_CHARS: Final = 128


class IdentityStore:
    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions

    async def find(self, issuer: str, subject: str) -> UserRecord | None:
        async with self._transactions.read() as db:
            row = await db.scalar(
                select(UserRow)
                .join(UserIdentityRow, UserIdentityRow.user_id == UserRow.id)
                .where(UserIdentityRow.issuer == issuer, UserIdentityRow.subject == subject)
            )
            return user_record(row) if row is not None else None

    async def link(self, issuer: str, subject: str, user_id: str) -> None:
        async with self._transactions.write() as db:
            if await db.get(UserIdentityRow, (issuer, subject)) is None:
                db.add(
                    UserIdentityRow(
                        issuer=issuer, subject=subject, user_id=user_id, created_at=utc_now()
                    )
                )

    async def begin(self, state: str, *, nonce: str, code_verifier: str, ttl: float) -> None:
        now = utc_now()
        async with self._transactions.write() as db:
            await db.execute(delete(OidcLoginRow).where(OidcLoginRow.expires_at <= now))
            db.add(
                OidcLoginRow(
                    state_hash=hash_secret(state),
                    nonce=nonce,
                    code_verifier=code_verifier,
                    expires_at=now + timedelta(seconds=ttl),
                )
            )

    async def take(self, state: str) -> tuple[str, str] | None:
        if not state or len(state) > MAX_STATE_CHARS:
            return None
        async with self._transactions.write() as db:
            row = await db.get(OidcLoginRow, hash_secret(state), with_for_update=True)
            if row is None:
                return None
            await db.delete(row)
            if row.expires_at <= utc_now():
                return None
            return row.nonce, row.code_verifier
