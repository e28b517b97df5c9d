"""Recovery writes of ``MessageStore``: what happens to ``pending`` assistant rows whose writer
is gone.

``reconcile_pending`` (boot, single node) turns every ``pending`` row into ``error``;
``take_over`` (cluster) settles the ``pending`` rows of one conversation a lost owner left, under
the new owner's fence; ``pending_conversations`` lists the conversations that have some. In each,
checkpointed parts are kept and closed as interrupted and the row gets exactly one
``data-error`` part. Each call is one transaction; the statements live in
``drupe.persistence.reconcile`` and ``drupe.persistence.takeover``. ``MessageStore`` delegates
here; nothing else should call these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from sqlalchemy import Table, bindparam, update

from drupe.errors import ValidationError
from drupe.persistence.clock import utc_now
from drupe.persistence.reconcile import (
    checkpointed_rows_statement,
    close_checkpointed_parts,
    reconcile_statement,
)
from drupe.persistence.tables import MessageRow
from drupe.persistence.takeover import (
    pending_conversations_statement,
    takeover_rows_statement,
    takeover_statement,
)
from drupe.persistence.transaction import Transactions

__all__ = ["pending_conversations", "reconcile_pending", "take_over"]


async def take_over(
    transactions: Transactions,
    dialect: str,
    conversation_id: str,
    *,
    fence: int,
    reason: str,
    rebuilt: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> list[str]:
    """Settle the ``pending`` assistant rows a lost owner left in this conversation.

    In one transaction, every such row whose fence is NULL or below ``fence`` keeps its
    checkpointed parts (or, for a row id in ``rebuilt``, those parts: the answer the new
    owner rebuilt from the chunk log) closed as interrupted, loses any ``data-error`` part
    and gains exactly one (``takeover_error_part(reason)``), becomes ``error`` and stores
    ``fence``. Returns the ids changed. Other conversations, settled rows and rows fenced
    with ``fence`` or above are untouched.
    """
    replacements = rebuilt or {}
    async with transactions.write() as db:
        conn = await db.connection()
        rows = (
            await conn.execute(
                takeover_rows_statement(
                    dialect, conversation_id, fence, with_empty=bool(replacements)
                )
            )
        ).all()
        closed = []
        for row in rows:
            row_id = str(row[0])
            parts: list[dict[str, Any]] | None
            if row_id in replacements:
                given = [dict(part) for part in replacements[row_id]]
                parts = close_checkpointed_parts(given) or given
            else:
                parts = close_checkpointed_parts(row[1])
            if parts is not None:
                closed.append({"row_id": row_id, "new_parts": parts})
        if closed:
            table = cast(Table, MessageRow.__table__)
            await conn.execute(
                update(table)
                .where(table.c.id == bindparam("row_id"))
                .values(parts=bindparam("new_parts")),
                closed,
            )
        result = await conn.execute(
            takeover_statement(
                dialect,
                conversation_id=conversation_id,
                fence=fence,
                reason=reason,
                now=utc_now(),
            )
        )
        return sorted(str(row[0]) for row in result.all())


async def pending_conversations(transactions: Transactions, limit: int = 1000) -> list[str]:
    """Ids of conversations that have ``pending`` assistant rows (at most ``limit``, in id
    order): what the cluster's takeover sweep and cluster-mode boot reconcile look at."""
    if limit < 1:
        raise ValidationError("limit must be at least 1")
    async with transactions.read() as db:
        result = await db.execute(pending_conversations_statement(limit))
        return [str(row[0]) for row in result.all()]


async def reconcile_pending(transactions: Transactions, dialect: str) -> int:
    """Turn every ``pending`` assistant row into ``error``; return how many changed.

    Checkpointed parts are kept and closed as interrupted (``close_checkpointed_parts``),
    then every pending row gets its one ``data-error`` part (``reconcile_statement``), in
    one transaction.
    """
    async with transactions.write() as db:
        conn = await db.connection()
        rows = (await conn.execute(checkpointed_rows_statement(dialect))).all()
        closed = [
            {"id": row[0], "parts": closed}
            for row in rows
            if (closed := close_checkpointed_parts(row[1])) is not None
        ]
        if closed:
            table = cast(Table, MessageRow.__table__)
            await conn.execute(
                update(table)
                .where(table.c.id == bindparam("row_id"))
                .values(parts=bindparam("new_parts")),
                [{"row_id": item["id"], "new_parts": item["parts"]} for item in closed],
            )
        result = await conn.execute(reconcile_statement(dialect, utc_now()))
        return result.rowcount
