"""``ChatLinkStore``: IM accounts that their users linked to themselves.

A signed-in user makes a one-time code; the IM account that sends ``/link <code>`` to a channel's
bot becomes that user's account on that channel, and its chats act as that user
(``drupe.channels.callers``).

Contract:

* ``make_code(user_id, ttl)`` returns a new code (``XXXX-XXXX``, 40 bits from an alphabet
  without look-alike letters); the database keeps only its SHA-256, and a user's earlier code
  is dropped (one at a time). Expired codes of anyone are dropped too.
* ``redeem(code, channel_id, platform_user_id)`` links the account to the code's user and
  returns that user, once: the code is deleted in the same transaction. An unknown or expired
  code, or a disabled user, returns None and links nothing; an account id longer than the
  column (255 characters) raises ``ValidationError``. Letters are read case-blind and
  without the dash, as a person types them. An account linked before is re-linked (the account
  chose, by sending the code).
* A link is a ``user_identities`` row with the issuer ``channel:<channel id>`` and the
  platform user id as the subject: ``linked_user`` reads it, ``accounts`` lists a user's,
  ``unlink`` removes an account's link (given a user id, only that user's: False when it was not
  theirs; without, whoever's it is: ``/unlink`` from the chat).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from sqlalchemy import delete, select

from drupe.errors import ValidationError
from drupe.persistence.auth_sessions import hash_secret
from drupe.persistence.clock import utc_now
from drupe.persistence.tables import ChatLinkCodeRow, UserIdentityRow, UserRow
from drupe.persistence.transaction import Transactions
from drupe.persistence.users import UserRecord, user_record

__all__ = ["CHANNEL_ISSUER", "ChatAccount", "ChatLinkStore", "normalize_code"]

CHANNEL_ISSUER: Final = "channel:"
_ALPHABET: Final = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no I, O, 0, 1
_CODE_CHARS: Final = 8
MAX_CODE_CHARS: Final = 32
MAX_ID_CHARS: Final = 255
"""The longest channel issuer and platform user id a link holds (``user_identities``)."""


@dataclass(frozen=True, slots=True)
class ChatAccount:
    """One IM account linked to a user."""

    channel_id: str
    platform_user_id: str
    linked_at: datetime


def normalize_code(code: str) -> str:
    """The code as stored: upper case, without spaces and dashes."""
    return "".join(code.split()).replace("-", "").upper()


class ChatLinkStore:
    """Link codes and linked IM accounts in one database. Safe to share between tasks."""

    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions

    async def make_code(self, user_id: str, *, ttl: float) -> tuple[str, datetime]:
        """A new code for ``user_id`` and when it expires (the user's older code is dropped)."""
        raw = "".join(secrets.choice(_ALPHABET) for _ in range(_CODE_CHARS))
        now = utc_now()
        expires_at = now + timedelta(seconds=ttl)
        async with self._transactions.write() as db:
            await db.execute(
                delete(ChatLinkCodeRow).where(
                    (ChatLinkCodeRow.user_id == user_id) | (ChatLinkCodeRow.expires_at <= now)
                )
            )
            db.add(
                ChatLinkCodeRow(code_hash=hash_secret(raw), user_id=user_id, expires_at=expires_at)
            )
        return f"{raw[:4]}-{raw[4:]}", expires_at

    async def redeem(
        self, code: str, *, channel_id: str, platform_user_id: str
    ) -> UserRecord | None:
        if not code or len(code) > MAX_CODE_CHARS:
            return None
        issuer = CHANNEL_ISSUER + channel_id
        if len(issuer) > MAX_ID_CHARS or len(platform_user_id) > MAX_ID_CHARS:
            raise ValidationError(
                f"this chat account's id is longer than {MAX_ID_CHARS} characters: it cannot "
                "be linked (a channel's config users table can still map it)"
            )
        async with self._transactions.write() as db:
            key = hash_secret(normalize_code(code))
            row = await db.get(ChatLinkCodeRow, key, with_for_update=True)
            if row is None:
                return None
            await db.delete(row)
            if row.expires_at <= utc_now():
                return None
            user = await db.get(UserRow, row.user_id)
            if user is None or user.disabled:
                return None
            link = await db.get(UserIdentityRow, (issuer, platform_user_id), with_for_update=True)
            if link is None:
                db.add(
                    UserIdentityRow(
                        issuer=issuer,
                        subject=platform_user_id,
                        user_id=user.id,
                        created_at=utc_now(),
                    )
                )
            else:
                link.user_id, link.created_at = user.id, utc_now()
            return user_record(user)

    async def linked_user(self, channel_id: str, platform_user_id: str) -> UserRecord | None:
        """The user this IM account is linked to (disabled or not), or None."""
        async with self._transactions.read() as db:
            row = await db.scalar(
                select(UserRow)
                .join(UserIdentityRow, UserIdentityRow.user_id == UserRow.id)
                .where(
                    UserIdentityRow.issuer == CHANNEL_ISSUER + channel_id,
                    UserIdentityRow.subject == platform_user_id,
                )
            )
            return user_record(row) if row is not None else None

    async def accounts(self, user_id: str) -> list[ChatAccount]:
        async with self._transactions.read() as db:
            rows = await db.scalars(
                select(UserIdentityRow)
                .where(
                    UserIdentityRow.user_id == user_id,
                    UserIdentityRow.issuer.startswith(CHANNEL_ISSUER, autoescape=True),
                )
                .order_by(UserIdentityRow.created_at, UserIdentityRow.issuer)
            )
            return [
                ChatAccount(row.issuer.removeprefix(CHANNEL_ISSUER), row.subject, row.created_at)
                for row in rows
            ]

    async def every_account(self) -> dict[str, list[ChatAccount]]:
        """Every linked IM account, by user id."""
        async with self._transactions.read() as db:
            rows = await db.scalars(
                select(UserIdentityRow)
                .where(UserIdentityRow.issuer.startswith(CHANNEL_ISSUER, autoescape=True))
                .order_by(UserIdentityRow.created_at, UserIdentityRow.issuer)
            )
            out: dict[str, list[ChatAccount]] = {}
            for row in rows:
                account = ChatAccount(
                    row.issuer.removeprefix(CHANNEL_ISSUER), row.subject, row.created_at
                )
                out.setdefault(row.user_id, []).append(account)
            return out

    async def unlink(
        self, channel_id: str, platform_user_id: str, *, user_id: str | None = None
    ) -> bool:
        """Remove the account's link (with ``user_id``: only when it is that user's); whether
        there was one."""
        match = [
            UserIdentityRow.issuer == CHANNEL_ISSUER + channel_id,
            UserIdentityRow.subject == platform_user_id,
        ]
        if user_id is not None:
            match.append(UserIdentityRow.user_id == user_id)
        async with self._transactions.write() as db:
            result = await db.execute(delete(UserIdentityRow).where(*match))
            return bool(getattr(result, "rowcount", 0))
