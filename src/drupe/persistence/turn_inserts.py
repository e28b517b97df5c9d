"""Many admissions' rows in one transaction: the batch half of ``MessageStore.create_turn``.

``insert_turns(transactions, turns)`` writes every turn's rows (its user row and placeholders) in
ONE transaction, with the checks of the one-turn insert done for all at once: one ``UPDATE`` of
the conversations' ``updated_at`` (every conversation must exist), one ``SELECT`` of the given
parents (each must be in its turn's conversation), one multi-row ``INSERT``. Any failed check or
database error raises and writes nothing; ``drupe.persistence.write_batches`` then writes each
turn on its own, so every caller gets exactly the error (or success) of the one-turn path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from sqlalchemy import select, update

from drupe.persistence.clock import utc_now
from drupe.persistence.tables import ConversationRow, MessageRow
from drupe.persistence.transaction import Transactions

__all__ = ["BatchRejected", "TurnRows", "insert_turns"]


class TurnRows(NamedTuple):
    """One turn's rows: ``parent_id`` is the parent of the first row (checked when given)."""

    conversation_id: str
    parent_id: str | None
    rows: Sequence[MessageRow]


class BatchRejected(Exception):
    """A turn of the batch fails a check: the batch writes nothing, each turn is tried alone."""


async def insert_turns(transactions: Transactions, turns: Sequence[TurnRows]) -> list[None]:
    """Insert every turn's rows in one transaction, or raise and insert nothing."""
    conversations = {turn.conversation_id for turn in turns}
    parents = {turn.parent_id for turn in turns if turn.parent_id is not None}
    async with transactions.write() as db:
        # Write first: on SQLite this takes the write lock before any read.
        touched = set(
            await db.scalars(
                update(ConversationRow)
                .where(ConversationRow.id.in_(conversations))
                .values(updated_at=utc_now())
                .returning(ConversationRow.id)
            )
        )
        if touched != conversations:
            raise BatchRejected("a conversation is unknown")
        if parents:
            found = await db.execute(
                select(MessageRow.id, MessageRow.conversation_id).where(MessageRow.id.in_(parents))
            )
            owner: dict[str, str] = dict(found.tuples().all())
            if any(t.parent_id is not None and owner.get(t.parent_id) != t.conversation_id
                   for t in turns):  # fmt: skip
                raise BatchRejected("a parent is not in its turn's conversation")
        db.add_all([row for turn in turns for row in turn.rows])
        await db.flush()
    return [None] * len(turns)
