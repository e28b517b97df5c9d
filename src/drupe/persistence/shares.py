"""``ShareStore``: conversations and agents shared with named users, to read or to write.

Contract: one row per (resource kind, resource id, user); sharing again changes the access.
``access_of`` is the access a user was given (None: not shared with them); ``shared_with``
lists a resource's shares; ``resources_of`` the ids of one kind shared with a user (what a
member's listings add to their own rows). Deleting a resource does not need to delete its
shares: a share of a missing resource grants nothing.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from sqlalchemy import delete, select

from drupe.errors import ValidationError
from drupe.persistence.clock import utc_now
from drupe.persistence.tables import ShareRow
from drupe.persistence.transaction import Transactions

__all__ = ["SHARE_ACCESS", "SHARE_KINDS", "Share", "ShareAccess", "ShareKind", "ShareStore"]

ShareKind = Literal["conversation", "agent"]
ShareAccess = Literal["read", "write"]
SHARE_KINDS: Final[tuple[ShareKind, ...]] = ("conversation", "agent")
SHARE_ACCESS: Final[tuple[ShareAccess, ...]] = ("read", "write")


@dataclass(frozen=True, slots=True, kw_only=True)
class Share:
    resource_kind: ShareKind
    resource_id: str
    user_id: str
    access: ShareAccess
    created_at: datetime


def _share(row: ShareRow) -> Share:
    return Share(
        resource_kind="agent" if row.resource_kind == "agent" else "conversation",
        resource_id=row.resource_id,
        user_id=row.user_id,
        access="write" if row.access == "write" else "read",
        created_at=row.created_at,
    )


class ShareStore:
    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions

    async def share(
        self, kind: ShareKind, resource_id: str, user_id: str, access: ShareAccess
    ) -> Share:
        if kind not in SHARE_KINDS:
            raise ValidationError(f"only {' and '.join(SHARE_KINDS)} can be shared")
        if access not in SHARE_ACCESS:
            raise ValidationError(f"access must be one of {', '.join(SHARE_ACCESS)}")
        async with self._transactions.write() as db:
            row = await db.get(ShareRow, (kind, resource_id, user_id))
            if row is None:
                row = ShareRow(
                    resource_kind=kind,
                    resource_id=resource_id,
                    user_id=user_id,
                    access=access,
                    created_at=utc_now(),
                )
                db.add(row)
            else:
                row.access = access
            return _share(row)

    async def unshare(self, kind: ShareKind, resource_id: str, user_id: str) -> bool:
        async with self._transactions.write() as db:
            result = await db.execute(
                delete(ShareRow).where(
                    ShareRow.resource_kind == kind,
                    ShareRow.resource_id == resource_id,
                    ShareRow.user_id == user_id,
                )
            )
            return bool(getattr(result, "rowcount", 0))

    async def access_of(
        self, kind: ShareKind, resource_id: str, user_id: str
    ) -> ShareAccess | None:
        async with self._transactions.read() as db:
            row = await db.get(ShareRow, (kind, resource_id, user_id))
            return None if row is None else _share(row).access

    async def shared_with(self, kind: ShareKind, resource_id: str) -> builtins.list[Share]:
        async with self._transactions.read() as db:
            rows = (
                await db.scalars(
                    select(ShareRow)
                    .where(ShareRow.resource_kind == kind, ShareRow.resource_id == resource_id)
                    .order_by(ShareRow.created_at)
                )
            ).all()
            return [_share(row) for row in rows]

    async def resources_of(self, kind: ShareKind, user_id: str) -> builtins.list[str]:
        async with self._transactions.read() as db:
            rows = await db.scalars(
                select(ShareRow.resource_id).where(
                    ShareRow.resource_kind == kind, ShareRow.user_id == user_id
                )
            )
            return list(rows.all())
