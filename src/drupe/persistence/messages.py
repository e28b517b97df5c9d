"""``MessageStore``: the message tree of every conversation, and its lifecycle writes.

The only code that issues SQL against ``messages``. It owns:

* turn admission writes: ``create_turn`` stores the user row (``success``) and one ``pending``
  assistant placeholder per model in ONE transaction, or nothing at all;
* terminal writes: ``finalize_assistant``, ``mark_error``, and ``set_pending`` (an approval
  continuation reopens a row);
* checkpoints of live answers (``write_checkpoints``: one executemany ``UPDATE`` of rows that
  are still ``pending``, see ``drupe.persistence.checkpoints``);
* boot reconciliation (``reconcile_pending``, see ``drupe.persistence.reconcile``);
* cluster fencing and takeover: every write above takes an optional ``fence`` (the writer's
  fencing token, ``drupe.cluster.lease.Fence.token``). A fenced update only changes a row whose
  stored ``fence`` is NULL or not above the token, and stores the token; otherwise it raises
  ``FencedWriteError`` (``mark_error`` returns False, checkpoints skip the row), so an owner
  that lost its lease writes nothing. ``fence=None`` is the single-node behaviour, unchanged.
  ``take_over`` settles a lost owner's ``pending`` rows of one conversation and
  ``pending_conversations`` lists the conversations that have some (``drupe.persistence.takeover``);
* reads: a row, a conversation's rows, the newest row, and the root-to-message path (a recursive
  CTE that runs on SQLite and PostgreSQL).

Every public call is one transaction. Bad input raises a ``ValidationError`` subclass and writes
nothing; a database failure raises ``PersistenceError``. Nothing here decides what a turn means:
the context providers and the persistence listener do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast
from weakref import WeakValueDictionary

from sqlalchemy import (
    ColumnElement,
    Integer,
    Table,
    bindparam,
    delete,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from drupe.errors import (
    DuplicateModelError,
    FencedWriteError,
    PersistenceError,
    UnknownConversationError,
    ValidationError,
)
from drupe.persistence.checkpoints import FencedCheckpoints, checkpoint_statement
from drupe.persistence.clock import utc_now
from drupe.persistence.json_text import jsonb_safe
from drupe.persistence.reconcile import (
    checkpointed_rows_statement,
    close_checkpointed_parts,
    reconcile_statement,
)
from drupe.persistence.records import (
    MessageRecord,
    MessageRole,
    MessageStatus,
    NewMessage,
    NewPlaceholder,
    TerminalStatus,
)
from drupe.persistence.tables import ConversationRow, MessageRow
from drupe.persistence.takeover import (
    pending_conversations_statement,
    takeover_rows_statement,
    takeover_statement,
)
from drupe.persistence.transaction import Transactions

__all__ = ["MessageStore"]

_MAX_DEPTH = 100_000
_TERMINAL_STATUSES: frozenset[str] = frozenset(("success", "paused", "error"))


def _record(row: MessageRow) -> MessageRecord:
    return MessageRecord(
        id=row.id,
        conversation_id=row.conversation_id,
        parent_id=row.parent_id,
        role=cast(MessageRole, row.role),  # the CHECK constraint admits only MessageRole values
        parts=list(row.parts),
        status=cast(MessageStatus, row.status),  # likewise guarded by a CHECK constraint
        model_id=row.model_id,
        siblings_group_id=row.siblings_group_id,
        stats=row.stats,
        metadata=row.meta,
        created_at=row.created_at,
        updated_at=row.updated_at,
        runtime_resume_token=row.runtime_resume_token,
        fence=row.fence,
    )


def _fence_allows(fence: int) -> ColumnElement[bool]:
    """The fencing guard: the row was never fenced, or not by a newer owner."""
    return or_(MessageRow.fence.is_(None), MessageRow.fence <= fence)


def _check_placeholders(placeholders: Sequence[NewPlaceholder]) -> None:
    models: set[str] = set()
    ids: set[str] = set()
    for placeholder in placeholders:
        if placeholder.message_id in ids:
            raise ValidationError(f"message id {placeholder.message_id!r} is given more than once")
        ids.add(placeholder.message_id)
        if placeholder.model_id is not None:
            if placeholder.model_id in models:
                raise DuplicateModelError(placeholder.model_id)
            models.add(placeholder.model_id)


class MessageStore:
    """Messages in one database. Safe to share between tasks."""

    def __init__(self, transactions: Transactions, *, dialect: str) -> None:
        self._transactions = transactions
        self.dialect = dialect
        """``"sqlite"`` or ``"postgresql"``: the backends report it as their ``kind``."""
        self._fenced_sinks: WeakValueDictionary[int, FencedCheckpoints] = WeakValueDictionary()

    # -- admission writes ------------------------------------------------------------------

    async def create_turn(
        self,
        conversation_id: str,
        *,
        user_message: NewMessage | None,
        parent_id: str | None,
        placeholders: Sequence[NewPlaceholder],
        siblings_group_id: int | None = None,
        fence: int | None = None,
    ) -> None:
        """Store a turn's rows in one transaction: all of them, or none.

        ``parent_id`` is the parent of the first new row: of the user row when ``user_message``
        is given, else (a regenerate that reuses an existing user row) of every placeholder,
        and then it is required. Placeholders hang under the user row otherwise. Raises
        ``UnknownConversationError``, ``DuplicateModelError`` or ``ValidationError`` (unknown
        parent, duplicate ids) and stores nothing. Every row stores ``fence`` (the owner's
        token in cluster mode; None: unfenced).
        """
        if user_message is None and parent_id is None:
            raise ValidationError("a turn without a user message needs parent_id (regenerate)")
        if user_message is None and not placeholders:
            raise ValidationError("a turn needs a user message or at least one placeholder")
        _check_placeholders(placeholders)
        if user_message is not None and any(p.message_id == user_message.id for p in placeholders):
            raise ValidationError(f"message id {user_message.id!r} is given more than once")
        rows: list[MessageRow] = []
        placeholder_parent = parent_id
        if user_message is not None:
            rows.append(self._complete_row(conversation_id, user_message, parent_id, fence))
            placeholder_parent = user_message.id
        rows.extend(
            self._placeholder_row(
                conversation_id,
                message_id=placeholder.message_id,
                parent_id=placeholder_parent,
                model_id=placeholder.model_id,
                siblings_group_id=siblings_group_id,
                metadata=placeholder.metadata,
                fence=fence,
            )
            for placeholder in placeholders
        )
        await self._insert(conversation_id, parent_id, rows)

    async def create_user_message(
        self,
        conversation_id: str,
        *,
        message: NewMessage,
        parent_id: str | None,
        fence: int | None = None,
    ) -> MessageRecord:
        """Store one complete message alone (a steer row); status ``success``."""
        row = self._complete_row(conversation_id, message, parent_id, fence)
        await self._insert(conversation_id, parent_id, [row])
        return _record(row)

    async def create_placeholder(
        self,
        conversation_id: str,
        *,
        message_id: str,
        parent_id: str | None,
        model_id: str | None,
        siblings_group_id: int | None = None,
        fence: int | None = None,
    ) -> MessageRecord:
        """Store one ``pending`` assistant row (e.g. the answer to a steer) with ``fence``."""
        row = self._placeholder_row(
            conversation_id,
            message_id=message_id,
            parent_id=parent_id,
            model_id=model_id,
            siblings_group_id=siblings_group_id,
            metadata=None,
            fence=fence,
        )
        await self._insert(conversation_id, parent_id, [row])
        return _record(row)

    async def next_siblings_group_id(self, conversation_id: str) -> int:
        """Return a new sibling group id; strictly increasing per conversation, never reused."""
        async with self._transactions.write() as db:
            value = await db.scalar(
                update(ConversationRow)
                .where(ConversationRow.id == conversation_id)
                .values(siblings_group_seq=ConversationRow.siblings_group_seq + 1)
                .returning(ConversationRow.siblings_group_seq)
            )
            if value is None:
                raise UnknownConversationError(conversation_id)
            return int(value)

    # -- terminal writes -------------------------------------------------------------------

    async def finalize_assistant(
        self,
        message_id: str,
        *,
        parts: Sequence[Mapping[str, Any]],
        status: TerminalStatus,
        metadata: Mapping[str, Any] | None = None,
        stats: Mapping[str, Any] | None = None,
        model_id: str | None = None,
        runtime_resume_token: str | None = None,
        fence: int | None = None,
    ) -> None:
        """Write the final parts and status of a row; ``None`` keeps the stored value.

        Raises ``PersistenceError`` when the row does not exist (nothing to finalize), and
        ``FencedWriteError`` when a newer owner fenced it (``fence`` below the row's).
        """
        if status not in _TERMINAL_STATUSES:
            raise ValidationError(f"{status!r} is not a terminal status")
        values: dict[str, Any] = {
            "parts": [dict(part) for part in parts],
            "status": status,
            "updated_at": utc_now(),
        }
        if metadata is not None:
            values["meta"] = dict(metadata)
        if stats is not None:
            values["stats"] = dict(stats)
        if model_id is not None:
            values["model_id"] = model_id
        if runtime_resume_token is not None:
            values["runtime_resume_token"] = runtime_resume_token
        await self._update_existing(message_id, values, fence)

    async def set_pending(
        self, message_id: str, *, parts: Sequence[Mapping[str, Any]], fence: int | None = None
    ) -> None:
        """Reopen a row as ``pending`` with these parts (an approval continuation resumes it).

        Raises like ``finalize_assistant`` (missing row, or fenced by a newer owner).
        """
        values = {"parts": [dict(part) for part in parts], "status": "pending"}
        await self._update_existing(message_id, {**values, "updated_at": utc_now()}, fence)

    async def set_parent(self, message_id: str, parent_id: str) -> None:
        """Move a row under ``parent_id`` (same conversation; never under itself or a descendant).

        Used when a queued steer is answered after an earlier steer's answer: the later steer
        row moves under that answer, so the conversation's path stays one line.
        """
        async with self._transactions.write() as db:
            row = await db.get(MessageRow, message_id)
            parent = await db.get(MessageRow, parent_id)
            if row is None or parent is None:
                raise ValidationError(f"message {message_id!r} or {parent_id!r} does not exist")
            if row.conversation_id != parent.conversation_id:
                raise ValidationError("a message can only move within its conversation")
            ancestor: MessageRow | None = parent
            while ancestor is not None:
                if ancestor.id == message_id:
                    raise ValidationError(f"message {parent_id!r} descends from {message_id!r}")
                ancestor = (
                    await db.get(MessageRow, ancestor.parent_id) if ancestor.parent_id else None
                )
            row.parent_id = parent_id
            row.updated_at = utc_now()

    async def mark_error(self, message_id: str, *, fence: int | None = None) -> bool:
        """Move a ``pending`` row to ``error``; return whether a row changed.

        Best-effort path after a failed terminal write: a row that already settled is never
        demoted, and a missing row is not an error. With ``fence``, a row fenced by a newer
        owner is left alone (False) and a marked row stores the token.
        """
        query = update(MessageRow).where(
            MessageRow.id == message_id, MessageRow.status == "pending"
        )
        values: dict[str, Any] = {"status": "error", "updated_at": utc_now()}
        if fence is not None:
            query = query.where(_fence_allows(fence))
            values["fence"] = fence
        async with self._transactions.write() as db:
            changed = await db.scalar(query.values(**values).returning(MessageRow.id))
            return changed is not None

    async def write_checkpoints(
        self, batch: Sequence[tuple[str, str]], *, fence: int | None = None
    ) -> int:
        """Write ``(message id, parts JSON text)`` into rows still ``pending``, in one
        transaction and one executemany ``UPDATE``; return the rows changed (PostgreSQL's
        driver reports no count for an executemany: the batch size is returned there).

        With ``fence``, rows fenced by a newer owner are skipped (in the same statement) and
        the rows written store the token.
        """
        if not batch:
            return 0
        safe = jsonb_safe if self.dialect == "postgresql" else str
        params: list[dict[str, Any]] = [{"id": key, "parts": safe(parts)} for key, parts in batch]
        if fence is not None:
            for param in params:
                param["fence"] = fence
        statement = checkpoint_statement(self.dialect, fenced=fence is not None)
        async with self._transactions.write_connection() as conn:
            result = await conn.execute(statement, params)
            count = result.rowcount
        return count if count >= 0 else len(batch)

    def fenced_checkpoints(self, fence: int) -> FencedCheckpoints:
        """The checkpoint sink of writers holding ``fence``: one object per token while it is
        in use, so the checkpointer batches the rows of one token together."""
        sink = self._fenced_sinks.get(fence)
        if sink is None:
            sink = FencedCheckpoints(self, fence)
            self._fenced_sinks[fence] = sink
        return sink

    # -- cluster takeover ------------------------------------------------------------------

    async def take_over(
        self,
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
        async with self._transactions.write() as db:
            conn = await db.connection()
            rows = (
                await conn.execute(
                    takeover_rows_statement(
                        self.dialect, conversation_id, fence, with_empty=bool(replacements)
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
                    self.dialect,
                    conversation_id=conversation_id,
                    fence=fence,
                    reason=reason,
                    now=utc_now(),
                )
            )
            return sorted(str(row[0]) for row in result.all())

    async def pending_conversations(self, limit: int = 1000) -> list[str]:
        """Ids of conversations that have ``pending`` assistant rows (at most ``limit``, in id
        order): what the cluster's takeover sweep and cluster-mode boot reconcile look at."""
        if limit < 1:
            raise ValidationError("limit must be at least 1")
        async with self._transactions.read() as db:
            result = await db.execute(pending_conversations_statement(limit))
            return [str(row[0]) for row in result.all()]

    async def reconcile_pending(self) -> int:
        """Turn every ``pending`` assistant row into ``error``; return how many changed.

        Checkpointed parts are kept and closed as interrupted (``close_checkpointed_parts``),
        then every pending row gets its one ``data-error`` part (``reconcile_statement``), in
        one transaction.
        """
        async with self._transactions.write() as db:
            conn = await db.connection()
            rows = (await conn.execute(checkpointed_rows_statement(self.dialect))).all()
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
            result = await conn.execute(reconcile_statement(self.dialect, utc_now()))
            return result.rowcount

    async def delete(self, message_ids: Iterable[str]) -> int:
        """Delete these rows and (``ON DELETE CASCADE``) their descendants; return the count
        of the rows named that existed."""
        ids = list(dict.fromkeys(message_ids))
        if not ids:
            return 0
        async with self._transactions.write() as db:
            deleted = await db.scalars(
                delete(MessageRow).where(MessageRow.id.in_(ids)).returning(MessageRow.id)
            )
            return len(deleted.all())

    # -- reads -----------------------------------------------------------------------------

    async def get(self, message_id: str) -> MessageRecord | None:
        """Return the row, or ``None``."""
        async with self._transactions.read() as db:
            row = await db.get(MessageRow, message_id)
            return None if row is None else _record(row)

    async def path_to(self, message_id: str) -> list[MessageRecord]:
        """Return the rows from the root of the tree down to ``message_id`` (inclusive).

        Raises ``ValidationError`` when the message does not exist.
        """
        path = (
            select(MessageRow.id, MessageRow.parent_id, literal_column("0", Integer).label("depth"))
            .where(MessageRow.id == message_id)
            .cte("path", recursive=True)
        )
        parent = select(MessageRow.id, MessageRow.parent_id, (path.c.depth + 1).label("depth"))
        parent = parent.join(path, MessageRow.id == path.c.parent_id).where(
            path.c.depth < _MAX_DEPTH
        )
        path = path.union_all(parent)
        query = (
            select(MessageRow).join(path, MessageRow.id == path.c.id).order_by(path.c.depth.desc())
        )
        async with self._transactions.read() as db:
            rows = (await db.scalars(query)).all()
        if not rows:
            raise ValidationError(f"unknown message {message_id!r}")
        return [_record(row) for row in rows]

    async def list_for_conversation(self, conversation_id: str) -> list[MessageRecord]:
        """Return every row of the conversation, oldest first."""
        query = (
            select(MessageRow)
            .where(MessageRow.conversation_id == conversation_id)
            .order_by(MessageRow.created_at, MessageRow.id)
        )
        async with self._transactions.read() as db:
            rows = (await db.scalars(query)).all()
            if not rows and await db.get(ConversationRow, conversation_id) is None:
                raise UnknownConversationError(conversation_id)
            return [_record(row) for row in rows]

    async def latest_leaf(self, conversation_id: str) -> MessageRecord | None:
        """Return the newest row of the conversation (``None`` when it has none)."""
        query = (
            select(MessageRow)
            .where(MessageRow.conversation_id == conversation_id)
            .order_by(MessageRow.created_at.desc(), MessageRow.id.desc())
            .limit(1)
        )
        async with self._transactions.read() as db:
            row = await db.scalar(query)
            if row is None and await db.get(ConversationRow, conversation_id) is None:
                raise UnknownConversationError(conversation_id)
            return None if row is None else _record(row)

    # -- internals -------------------------------------------------------------------------

    @staticmethod
    def _complete_row(
        conversation_id: str, message: NewMessage, parent_id: str | None, fence: int | None
    ) -> MessageRow:
        now = utc_now()
        return MessageRow(
            id=message.id,
            conversation_id=conversation_id,
            parent_id=parent_id,
            role=message.role,
            parts=[dict(part) for part in message.parts],
            status="success",
            model_id=None,
            siblings_group_id=None,
            stats=None,
            meta=None if message.metadata is None else dict(message.metadata),
            created_at=now,
            updated_at=now,
            fence=fence,
        )

    @staticmethod
    def _placeholder_row(
        conversation_id: str,
        *,
        message_id: str,
        parent_id: str | None,
        model_id: str | None,
        siblings_group_id: int | None,
        metadata: Mapping[str, Any] | None,
        fence: int | None,
    ) -> MessageRow:
        now = utc_now()
        return MessageRow(
            id=message_id,
            conversation_id=conversation_id,
            parent_id=parent_id,
            role="assistant",
            parts=[],
            status="pending",
            model_id=model_id,
            siblings_group_id=siblings_group_id,
            stats=None,
            meta=None if metadata is None else dict(metadata),
            created_at=now,
            updated_at=now,
            fence=fence,
        )

    async def _insert(
        self, conversation_id: str, parent_id: str | None, rows: Sequence[MessageRow]
    ) -> None:
        try:
            async with self._transactions.write() as db:
                # Write first: on SQLite this takes the write lock before any read, so a
                # concurrent writer makes us wait (busy_timeout) instead of failing the upgrade.
                touched = await db.scalar(
                    update(ConversationRow)
                    .where(ConversationRow.id == conversation_id)
                    .values(updated_at=utc_now())
                    .returning(ConversationRow.id)
                )
                if touched is None:
                    raise UnknownConversationError(conversation_id)
                if parent_id is not None:
                    await self._check_parent(db, conversation_id, parent_id)
                db.add_all(rows)
                await db.flush()
        except PersistenceError as err:
            if isinstance(err.__cause__, IntegrityError):
                raise ValidationError(f"rejected by the database: {err.__cause__.orig}") from err
            raise

    @staticmethod
    async def _check_parent(db: AsyncSession, conversation_id: str, parent_id: str) -> None:
        owner = await db.scalar(
            select(MessageRow.conversation_id).where(MessageRow.id == parent_id)
        )
        if owner != conversation_id:
            raise ValidationError(
                f"parent message {parent_id!r} is not in conversation {conversation_id!r}"
            )

    async def _update_existing(
        self, message_id: str, values: Mapping[str, Any], fence: int | None
    ) -> None:
        query = update(MessageRow).where(MessageRow.id == message_id)
        if fence is not None:
            query = query.where(_fence_allows(fence))
            values = {**values, "fence": fence}
        async with self._transactions.write() as db:
            changed = await db.scalar(query.values(**values).returning(MessageRow.id))
            if changed is not None:
                return
            if fence is not None and await db.get(MessageRow, message_id) is not None:
                raise FencedWriteError(message_id, fence)
            raise PersistenceError(f"message {message_id!r} does not exist")
