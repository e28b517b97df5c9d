"""Owners of rows from before identity: ``adopt_unowned`` gives every unowned row an owner.

Contract: ``adopt_unowned(transactions, owner_id)`` sets ``owner_id`` on every row of every
owned table that has none (the first admin adopts what the server held before it had users:
nothing is lost or left invisible); returns how many rows it changed. Idempotent.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import update

from drupe.persistence.tables import (
    AgentRow,
    AgentSessionRow,
    ApiKeyRow,
    ChannelBindingRow,
    ConversationRow,
    GatewayResponseRow,
    ScheduleRow,
    TaskRunRow,
)
from drupe.persistence.transaction import Transactions

__all__ = ["OWNED_ROWS", "adopt_unowned"]

OWNED_ROWS: Final = (
    ConversationRow,
    ApiKeyRow,
    GatewayResponseRow,
    AgentRow,
    AgentSessionRow,
    ScheduleRow,
    TaskRunRow,
    ChannelBindingRow,
)


async def adopt_unowned(transactions: Transactions, owner_id: str) -> int:
    changed = 0
    async with transactions.write() as db:
        for row in OWNED_ROWS:
            result = await db.execute(
                update(row).where(row.owner_id.is_(None)).values(owner_id=owner_id)
            )
            changed += int(getattr(result, "rowcount", 0) or 0)
    return changed
