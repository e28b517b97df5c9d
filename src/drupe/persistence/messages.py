"""``MessageStore``: the message tree of every conversation, and its lifecycle writes.

The only code that issues SQL against ``messages``. It owns:

* turn admission writes: ``create_turn`` stores the user row (``success``) and one ``pending``
  assistant placeholder per model in ONE transaction, or nothing at all; concurrent calls are
  committed together (``write_batches``, ``turn_inserts``), each returning once its rows are;
* terminal writes: ``finalize_assistant``, ``mark_error``, and ``set_pending`` (an approval
  continuation reopens a row);
* checkpoints of live answers (``write_checkpoints``: one executemany ``UPDATE`` of rows that
  are still ``pending``, see ``drupe.persistence.checkpoints``);
* cluster fencing: every write above takes an optional ``fence`` (the writer's fencing token,
  ``drupe.cluster.lease.Fence.token``). A fenced update only changes a row whose stored
  ``fence`` is NULL or not above the token, and stores the token; otherwise it raises
  ``FencedWriteError`` (``mark_error`` returns False, checkpoints skip the row), so an owner
  that lost its lease writes nothing. ``fence=None`` is the single-node behaviour, unchanged;
* recovery (``reconcile_pending``, ``take_over``, ``pending_conversations``) in
  ``message_recovery``, reads in ``message_reads``, row building in ``message_rows``: the
  store delegates to them and stays the one object callers hold.

Every public call is one transaction. Bad input raises a ``ValidationError`` subclass and writes
nothing; a database failure raises ``PersistenceError``. Nothing here decides what a turn means:
the context providers and the persistence listener do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import Any
from weakref import WeakValueDictionary

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from drupe.errors import (
    FencedWriteError,
    PersistenceError,
    UnknownConversationError,
    ValidationError,
)
from drupe.persistence import message_reads, message_recovery
from drupe.persistence.checkpoints import FencedCheckpoints, write_checkpoint_batch
from drupe.persistence.clock import utc_now
from drupe.persistence.message_rows import (
    check_placeholders,
    complete_row,
    fence_allows,
    message_record,
    placeholder_row,
)
from drupe.persistence.records import (
    MessageRecord,
    NewMessage,
    NewPlaceholder,
    TerminalStatus,
)
from drupe.persistence.tables import ConversationRow, MessageRow
from drupe.persistence.transaction import Transactions
from drupe.persistence.turn_inserts import TurnRows, insert_turns
from drupe.persistence.write_batches import WriteBatches

__all__ = ["MessageStore"]

_TERMINAL_STATUSES: frozenset[str] = frozenset(("success", "paused", "error"))


class MessageStore:
    """Messages in one database. Safe to share between tasks."""

    def __init__(self, transactions: Transactions, *, dialect: str) -> None:
        self._transactions = transactions
        self.dialect = dialect
        """``"sqlite"`` or ``"postgresql"``: the backends report it as their ``kind``."""
        self._fenced_sinks: WeakValueDictionary[int, FencedCheckpoints] = WeakValueDictionary()
        self.turn_writes = WriteBatches(self._insert_turn, partial(insert_turns, transactions))

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
        check_placeholders(placeholders)
        if user_message is not None and any(p.message_id == user_message.id for p in placeholders):
            raise ValidationError(f"message id {user_message.id!r} is given more than once")
        rows: list[MessageRow] = []
        placeholder_parent = parent_id
        if user_message is not None:
            rows.append(complete_row(conversation_id, user_message, parent_id, fence))
            placeholder_parent = user_message.id
        rows.extend(
            placeholder_row(
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
        await self.turn_writes.run(TurnRows(conversation_id, parent_id, rows))

    async def create_user_message(
        self,
        conversation_id: str,
        *,
        message: NewMessage,
        parent_id: str | None,
        fence: int | None = None,
    ) -> MessageRecord:
        """Store one complete message alone (a steer row); status ``success``."""
        row = complete_row(conversation_id, message, parent_id, fence)
        await self._insert(conversation_id, parent_id, [row])
        return message_record(row)

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
        row = placeholder_row(
            conversation_id,
            message_id=message_id,
            parent_id=parent_id,
            model_id=model_id,
            siblings_group_id=siblings_group_id,
            metadata=None,
            fence=fence,
        )
        await self._insert(conversation_id, parent_id, [row])
        return message_record(row)

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
            query = query.where(fence_allows(fence))
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
        return await write_checkpoint_batch(self._transactions, self.dialect, batch, fence)

    def fenced_checkpoints(self, fence: int) -> FencedCheckpoints:
        """The checkpoint sink of writers holding ``fence``: one object per token while it is
        in use, so the checkpointer batches the rows of one token together."""
        sink = self._fenced_sinks.get(fence)
        if sink is None:
            sink = FencedCheckpoints(self, fence)
            self._fenced_sinks[fence] = sink
        return sink

    # -- recovery (drupe.persistence.message_recovery) ---------------------------------------

    async def take_over(
        self,
        conversation_id: str,
        *,
        fence: int,
        reason: str,
        rebuilt: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    ) -> list[str]:
        """Settle the ``pending`` assistant rows a lost owner left in this conversation, under
        ``fence``; return the ids changed (``message_recovery.take_over``)."""
        return await message_recovery.take_over(
            self._transactions,
            self.dialect,
            conversation_id,
            fence=fence,
            reason=reason,
            rebuilt=rebuilt,
        )

    async def pending_conversations(self, limit: int = 1000) -> list[str]:
        """Ids of conversations that have ``pending`` assistant rows (at most ``limit``, in id
        order): what the cluster's takeover sweep and cluster-mode boot reconcile look at."""
        return await message_recovery.pending_conversations(self._transactions, limit)

    async def reconcile_pending(self) -> int:
        """Turn every ``pending`` assistant row into ``error``; return how many changed
        (``message_recovery.reconcile_pending``)."""
        return await message_recovery.reconcile_pending(self._transactions, self.dialect)

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

    # -- reads (drupe.persistence.message_reads) ---------------------------------------------

    async def get(self, message_id: str) -> MessageRecord | None:
        """Return the row, or ``None``."""
        return await message_reads.get_message(self._transactions, message_id)

    async def path_to(self, message_id: str) -> list[MessageRecord]:
        """Return the rows from the root of the tree down to ``message_id`` (inclusive).

        Raises ``ValidationError`` when the message does not exist.
        """
        return await message_reads.path_to(self._transactions, message_id)

    async def list_for_conversation(self, conversation_id: str) -> list[MessageRecord]:
        """Return every row of the conversation, oldest first."""
        return await message_reads.list_for_conversation(self._transactions, conversation_id)

    async def latest_leaf(self, conversation_id: str) -> MessageRecord | None:
        """Return the newest row of the conversation (``None`` when it has none)."""
        return await message_reads.latest_leaf(self._transactions, conversation_id)

    # -- internals -------------------------------------------------------------------------

    async def _insert_turn(self, turn: TurnRows) -> None:
        await self._insert(turn.conversation_id, turn.parent_id, turn.rows)

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
            query = query.where(fence_allows(fence))
            values = {**values, "fence": fence}
        async with self._transactions.write() as db:
            changed = await db.scalar(query.values(**values).returning(MessageRow.id))
            if changed is not None:
                return
            if fence is not None and await db.get(MessageRow, message_id) is not None:
                raise FencedWriteError(message_id, fence)
            raise PersistenceError(f"message {message_id!r} does not exist")
