"""Many conversations' admission writes in one transaction: the batch halves of
``ConversationStore.create`` (a submit to a new id) and ``title_if_untitled`` (its first title).

Each raises and writes nothing when one of its items would fail or would not be the one-item
result exactly (an id taken, the same conversation twice in one batch); then
``drupe.persistence.write_batches`` writes each item on its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import case, update

from drupe.persistence.tables import ConversationRow
from drupe.persistence.transaction import Transactions

__all__ = ["BatchRejected", "insert_conversations", "set_first_titles"]


class BatchRejected(Exception):
    """An item of the batch needs its own write: the batch writes nothing."""


async def insert_conversations(
    transactions: Transactions, rows: Sequence[ConversationRow]
) -> list[ConversationRow]:
    """Insert every row in one transaction (one multi-row ``INSERT``), or raise."""
    if len({row.id for row in rows}) != len(rows):
        raise BatchRejected("the same conversation id twice")
    async with transactions.write() as db:
        db.add_all(rows)
    return list(rows)


async def set_first_titles(
    transactions: Transactions, titles: Sequence[tuple[str, str]]
) -> list[bool]:
    """``(conversation_id, title)``: set each title where there is none yet, in one ``UPDATE``;
    ``True`` for each conversation it titled."""
    by_id = dict(titles)
    if len(by_id) != len(titles):
        raise BatchRejected("the same conversation twice")
    async with transactions.write() as db:
        titled = set(
            await db.scalars(
                update(ConversationRow)
                .where(ConversationRow.id.in_(by_id), ConversationRow.title.is_(None))
                .values(title=case(by_id, value=ConversationRow.id))
                .returning(ConversationRow.id)
                .execution_options(synchronize_session=False)
            )
        )
    return [conversation_id in titled for conversation_id, _ in titles]
