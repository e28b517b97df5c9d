"""``ConversationStore``: create, read, list, rename, touch and delete conversations.

The only code that issues SQL against ``conversations``. Deleting a conversation deletes its
messages (``ON DELETE CASCADE``). Listing is newest-updated first with a keyset cursor
(``ConversationRecord.cursor``), so pages stay stable while new conversations arrive. Every call
is one transaction; a missing conversation raises ``UnknownConversationError``.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Collection, Mapping
from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, or_, select, update
from sqlalchemy.exc import IntegrityError

from drupe.errors import PersistenceError, UnknownConversationError, ValidationError
from drupe.observability.turn_spans import trace_id_for
from drupe.persistence.clock import utc_now
from drupe.persistence.conversation_batches import insert_conversations, set_first_titles
from drupe.persistence.records import ConversationRecord
from drupe.persistence.tables import ConversationRow, ShareRow
from drupe.persistence.transaction import Transactions
from drupe.persistence.write_batches import WriteBatches

__all__ = ["ConversationStore", "new_conversation_id", "visible_to_clause"]

_MAX_PAGE = 1000


def new_conversation_id() -> str:
    """Return a new random conversation id."""
    return f"conv_{uuid.uuid4().hex}"


def _record(row: ConversationRow) -> ConversationRecord:
    return ConversationRecord(
        id=row.id,
        title=row.title,
        created_at=row.created_at,
        updated_at=row.updated_at,
        trace_id=row.trace_id,
        metadata=dict(row.meta),
        owner_id=row.owner_id,
    )


def visible_to_clause(user_id: str) -> ColumnElement[bool]:
    """Conversations ``user_id`` owns or that are shared with them (the search uses it too)."""
    shared = select(ShareRow.resource_id).where(
        ShareRow.resource_kind == "conversation", ShareRow.user_id == user_id
    )
    return or_(ConversationRow.owner_id == user_id, ConversationRow.id.in_(shared))


def _parse_cursor(cursor: str) -> tuple[datetime, str]:
    stamp, sep, conversation_id = cursor.partition("|")
    try:
        updated_at = datetime.fromisoformat(stamp)
    except ValueError:
        updated_at = None
    if not sep or updated_at is None or updated_at.tzinfo is None:
        raise ValidationError(f"malformed conversation cursor {cursor!r}")
    return updated_at, conversation_id


class ConversationStore:
    """Conversations in one database. Safe to share between tasks."""

    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions
        # Concurrent creates and first titles are committed in batches (``write_batches``).
        self._creates = WriteBatches(self._insert, partial(insert_conversations, transactions))
        self._titles = WriteBatches(self._title, partial(set_first_titles, transactions))

    async def create(
        self,
        conversation_id: str | None = None,
        *,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        trace_id: str | None = None,
        owner_id: str | None = None,
    ) -> ConversationRecord:
        """Create a conversation; raises ``ValidationError`` if the id is taken."""
        now = utc_now()
        new_id = conversation_id or new_conversation_id()
        row = ConversationRow(
            id=new_id,
            title=title,
            created_at=now,
            updated_at=now,
            trace_id=trace_id or trace_id_for(new_id),
            siblings_group_seq=0,
            meta=dict(metadata or {}),
            owner_id=owner_id,
        )
        return _record(await self._creates.run(row))

    async def _insert(self, row: ConversationRow) -> ConversationRow:
        try:
            async with self._transactions.write() as db:
                db.add(row)
        except PersistenceError as err:
            if isinstance(err.__cause__, IntegrityError):
                raise ValidationError(f"conversation {row.id!r} already exists") from err
            raise
        return row

    async def ensure(
        self, conversation_id: str, *, title: str | None = None, owner_id: str | None = None
    ) -> ConversationRecord:
        """Return the conversation, creating it first (owned by ``owner_id``) if it does not
        exist yet."""
        existing = await self.get(conversation_id)
        if existing is not None:
            return existing
        return await self.create_absent(conversation_id, title=title, owner_id=owner_id)

    async def create_absent(
        self, conversation_id: str, *, title: str | None = None, owner_id: str | None = None
    ) -> ConversationRecord:
        """``ensure`` for an id just read as absent: create it, or return the conversation
        another task created in between (one read fewer)."""
        try:
            return await self.create(conversation_id, title=title, owner_id=owner_id)
        except ValidationError:
            # Another task created it between our read and our insert.
            existing = await self.get(conversation_id)
            if existing is None:
                raise
            return existing

    async def get(self, conversation_id: str) -> ConversationRecord | None:
        """Return the conversation, or ``None`` if there is none with this id."""
        async with self._transactions.read() as db:
            row = await db.get(ConversationRow, conversation_id)
            return None if row is None else _record(row)

    async def list(
        self, limit: int = 50, before: str | None = None, *, visible_to: str | None = None
    ) -> builtins.list[ConversationRecord]:
        """Return up to ``limit`` conversations, newest-updated first, after cursor ``before``;
        with ``visible_to``, only that user's own and those shared with them."""
        if not 1 <= limit <= _MAX_PAGE:
            raise ValidationError(f"limit must be between 1 and {_MAX_PAGE}, got {limit!r}")
        query = select(ConversationRow).order_by(
            ConversationRow.updated_at.desc(), ConversationRow.id.desc()
        )
        if visible_to is not None:
            query = query.where(visible_to_clause(visible_to))
        if before is not None:
            updated_at, conversation_id = _parse_cursor(before)
            query = query.where(
                or_(
                    ConversationRow.updated_at < updated_at,
                    and_(
                        ConversationRow.updated_at == updated_at,
                        ConversationRow.id < conversation_id,
                    ),
                )
            )
        async with self._transactions.read() as db:
            rows = (await db.scalars(query.limit(limit))).all()
            return [_record(row) for row in rows]

    async def visible_among(self, conversation_ids: Collection[str], user_id: str) -> set[str]:
        """Those of ``conversation_ids`` that ``user_id`` owns or has been shared (one query)."""
        ids = [cid for cid in conversation_ids if len(cid) <= 255]
        if not ids:
            return set()
        query = select(ConversationRow.id).where(
            ConversationRow.id.in_(ids), visible_to_clause(user_id)
        )
        async with self._transactions.read() as db:
            return set((await db.scalars(query)).all())

    async def rename(self, conversation_id: str, title: str | None) -> ConversationRecord:
        """Set the title (``None`` clears it) and bump ``updated_at``."""
        return await self._update(conversation_id, title=title, updated_at=utc_now())

    async def title_if_untitled(self, conversation_id: str, title: str) -> bool:
        """Set the title only if there is none yet (a rename wins); ``True`` if it was set.

        ``updated_at`` stays: a title is not activity."""
        return await self._titles.run((conversation_id, title))

    async def _title(self, item: tuple[str, str]) -> bool:
        conversation_id, title = item
        async with self._transactions.write() as db:
            result = await db.execute(
                update(ConversationRow)
                .where(ConversationRow.id == conversation_id, ConversationRow.title.is_(None))
                .values(title=title)
            )
            return bool(getattr(result, "rowcount", 0))

    async def replace_title(self, conversation_id: str, expected: str, title: str) -> bool:
        """Set the title only if it is still ``expected`` (a rename made since wins); ``True``
        if it was set. ``updated_at`` stays: a title is not activity."""
        async with self._transactions.write() as db:
            result = await db.execute(
                update(ConversationRow)
                .where(ConversationRow.id == conversation_id, ConversationRow.title == expected)
                .values(title=title)
            )
            return bool(getattr(result, "rowcount", 0))

    async def set_metadata_key(
        self, conversation_id: str, key: str, value: Any
    ) -> ConversationRecord:
        """Set one key of the conversation's metadata (``None`` removes it); the rest stays."""
        async with self._transactions.write() as db:
            row = await db.get(ConversationRow, conversation_id, with_for_update=True)
            if row is None:
                raise UnknownConversationError(conversation_id)
            meta = dict(row.meta)
            if value is None:
                meta.pop(key, None)
            else:
                meta[key] = value
            row.meta = meta
            await db.flush()
            return _record(row)

    async def touch(self, conversation_id: str) -> ConversationRecord:
        """Bump ``updated_at`` to now (the conversation moves to the top of the list)."""
        return await self._update(conversation_id, updated_at=utc_now())

    async def set_trace_id(self, conversation_id: str, trace_id: str | None) -> ConversationRecord:
        """Record the trace id of the conversation's latest turn."""
        return await self._update(conversation_id, trace_id=trace_id)

    async def delete(self, conversation_id: str) -> None:
        """Delete the conversation and every message in it."""
        async with self._transactions.write() as db:
            result = await db.execute(
                delete(ConversationRow)
                .where(ConversationRow.id == conversation_id)
                .returning(ConversationRow.id)
            )
            if result.first() is None:
                raise UnknownConversationError(conversation_id)

    async def _update(self, conversation_id: str, **values: Any) -> ConversationRecord:
        async with self._transactions.write() as db:
            row = await db.scalar(
                update(ConversationRow)
                .where(ConversationRow.id == conversation_id)
                .values(**values)
                .returning(ConversationRow)
            )
            if row is None:
                raise UnknownConversationError(conversation_id)
            return _record(row)
