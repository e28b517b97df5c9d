"""The row side of ``MessageStore``: new ``messages`` rows, their records, and the checks and
guards its writes share.

Pure functions, no SQL issued: ``complete_row`` (a ``success`` row, e.g. the user message) and
``placeholder_row`` (a ``pending`` assistant row) build ORM rows stamped with ``utc_now``;
``message_record`` turns a row into the ``MessageRecord`` callers see; ``check_placeholders``
rejects a turn's duplicate ids or models (``ValidationError``, ``DuplicateModelError``);
``fence_allows`` is the fencing guard of every fenced update.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from sqlalchemy import ColumnElement, or_

from drupe.errors import DuplicateModelError, ValidationError
from drupe.persistence.clock import utc_now
from drupe.persistence.records import (
    MessageRecord,
    MessageRole,
    MessageStatus,
    NewMessage,
    NewPlaceholder,
)
from drupe.persistence.tables import MessageRow

__all__ = [
    "check_placeholders",
    "complete_row",
    "fence_allows",
    "message_record",
    "placeholder_row",
]


def message_record(row: MessageRow) -> MessageRecord:
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


def fence_allows(fence: int) -> ColumnElement[bool]:
    """The fencing guard: the row was never fenced, or not by a newer owner."""
    return or_(MessageRow.fence.is_(None), MessageRow.fence <= fence)


def check_placeholders(placeholders: Sequence[NewPlaceholder]) -> None:
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


def complete_row(
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


def placeholder_row(
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
