"""Reads of ``MessageStore``: one row, a conversation's rows, its newest row, and the
root-to-message path (a recursive CTE that runs on SQLite and PostgreSQL).

Each call is one read transaction and returns ``MessageRecord`` values. A conversation that does
not exist raises ``UnknownConversationError``; an unknown message on a path raises
``ValidationError``. ``MessageStore`` delegates here.
"""

from __future__ import annotations

from sqlalchemy import Integer, literal_column, select

from drupe.errors import UnknownConversationError, ValidationError
from drupe.persistence.message_rows import message_record
from drupe.persistence.records import MessageRecord
from drupe.persistence.tables import ConversationRow, MessageRow
from drupe.persistence.transaction import Transactions

__all__ = ["get_message", "latest_leaf", "list_for_conversation", "path_to"]

_MAX_DEPTH = 100_000


async def get_message(transactions: Transactions, message_id: str) -> MessageRecord | None:
    """Return the row, or ``None``."""
    async with transactions.read() as db:
        row = await db.get(MessageRow, message_id)
        return None if row is None else message_record(row)


async def path_to(transactions: Transactions, message_id: str) -> list[MessageRecord]:
    """Return the rows from the root of the tree down to ``message_id`` (inclusive).

    Raises ``ValidationError`` when the message does not exist.
    """
    path = (
        select(MessageRow.id, MessageRow.parent_id, literal_column("0", Integer).label("depth"))
        .where(MessageRow.id == message_id)
        .cte("path", recursive=True)
    )
    parent = select(MessageRow.id, MessageRow.parent_id, (path.c.depth + 1).label("depth"))
    parent = parent.join(path, MessageRow.id == path.c.parent_id).where(path.c.depth < _MAX_DEPTH)
    path = path.union_all(parent)
    query = select(MessageRow).join(path, MessageRow.id == path.c.id).order_by(path.c.depth.desc())
    async with transactions.read() as db:
        rows = (await db.scalars(query)).all()
    if not rows:
        raise ValidationError(f"unknown message {message_id!r}")
    return [message_record(row) for row in rows]


async def list_for_conversation(
    transactions: Transactions, conversation_id: str
) -> list[MessageRecord]:
    """Return every row of the conversation, oldest first."""
    query = (
        select(MessageRow)
        .where(MessageRow.conversation_id == conversation_id)
        .order_by(MessageRow.created_at, MessageRow.id)
    )
    async with transactions.read() as db:
        rows = (await db.scalars(query)).all()
        if not rows and await db.get(ConversationRow, conversation_id) is None:
            raise UnknownConversationError(conversation_id)
        return [message_record(row) for row in rows]


async def latest_leaf(transactions: Transactions, conversation_id: str) -> MessageRecord | None:
    """Return the newest row of the conversation (``None`` when it has none)."""
    query = (
        select(MessageRow)
        .where(MessageRow.conversation_id == conversation_id)
        .order_by(MessageRow.created_at.desc(), MessageRow.id.desc())
        .limit(1)
    )
    async with transactions.read() as db:
        row = await db.scalar(query)
        if row is None and await db.get(ConversationRow, conversation_id) is None:
            raise UnknownConversationError(conversation_id)
        return None if row is None else message_record(row)
