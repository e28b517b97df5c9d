"""Cluster takeover: a new owner settles the rows a lost owner left ``pending``.

When a node is lost (killed, partitioned, paused past its lease), the node that takes the
conversation's lease over with a higher fencing token finalizes the old owner's rows
(``MessageStore.take_over``), in one transaction:

1. ``takeover_rows_statement``: the conversation's ``pending`` assistant rows whose ``fence`` is
   NULL or below the new token, with their parts (locked ``FOR UPDATE`` on PostgreSQL);
2. rows holding checkpointed parts keep them, closed as interrupted by the boot reconcile's
   ``close_checkpointed_parts`` (streaming text done, open tools ``output-error``, ...);
3. ``takeover_statement``: one set-based ``UPDATE`` of those rows: status ``error``, every old
   ``data-error`` part dropped and exactly one appended (``takeover_error_part(reason)``:
   ``{"type": "data-error", "data": {"name": "NodeLost", "message": reason}}``), and ``fence``
   set to the new token, so the lost owner's later writes (all fenced with its lower token)
   change nothing. It returns the ids it changed.

``pending_conversations_statement`` lists the conversations that have ``pending`` assistant rows
(the takeover sweep, and the boot reconcile in cluster mode, which touches only conversations
whose lease is dead). The literal ``status = 'pending'`` lets both planners use the partial index
``ix_messages_pending``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

import orjson
from sqlalchemy import (
    BigInteger,
    Integer,
    Select,
    String,
    TextClause,
    bindparam,
    func,
    or_,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

from drupe.errors import PersistenceError
from drupe.persistence.tables import MessageRow, UtcDateTime

__all__ = [
    "NODE_LOST",
    "POSTGRESQL_TAKEOVER_SQL",
    "SQLITE_TAKEOVER_SQL",
    "pending_conversations_statement",
    "takeover_error_part",
    "takeover_rows_statement",
    "takeover_statement",
]

NODE_LOST: Final = "NodeLost"
"""The ``name`` of the ``data-error`` part a takeover appends."""

_WHERE: Final = """
WHERE status = 'pending' AND role = 'assistant' AND conversation_id = :conversation_id
  AND (fence IS NULL OR fence < :fence)
RETURNING id
"""

SQLITE_TAKEOVER_SQL: Final = (
    """
UPDATE messages
SET status = 'error',
    updated_at = :now,
    fence = :fence,
    parts = json_insert(
        (SELECT json_group_array(json(part.value))
           FROM json_each(messages.parts) AS part
          WHERE json_extract(part.value, '$.type') IS NOT 'data-error'),
        '$[#]', json(:part))"""
    + _WHERE
)

POSTGRESQL_TAKEOVER_SQL: Final = (
    """
UPDATE messages
SET status = 'error',
    updated_at = :now,
    fence = :fence,
    parts = COALESCE(
        (SELECT jsonb_agg(part.value ORDER BY part.ordinality)
           FROM jsonb_array_elements(messages.parts) WITH ORDINALITY AS part(value, ordinality)
          WHERE part.value ->> 'type' IS DISTINCT FROM 'data-error'),
        '[]'::jsonb) || jsonb_build_array(:part)"""
    + _WHERE
)

_PENDING_CONVERSATIONS_SQL: Final = """
SELECT DISTINCT conversation_id FROM messages
WHERE status = 'pending' AND role = 'assistant'
ORDER BY conversation_id
LIMIT :limit
"""


def takeover_error_part(reason: str) -> dict[str, Any]:
    """The one ``data-error`` part a taken-over row ends with."""
    return {"type": "data-error", "data": {"name": NODE_LOST, "message": reason}}


def takeover_rows_statement(
    dialect: str, conversation_id: str, fence: int, *, with_empty: bool = False
) -> Select[tuple[str, Any]]:
    """Select ``(id, parts)`` of the conversation's pending assistant rows a takeover with
    ``fence`` settles and that hold checkpointed parts (``with_empty``: also those with none,
    for answers rebuilt from the chunk log), locked on PostgreSQL."""
    length = func.jsonb_array_length if dialect == "postgresql" else func.json_array_length
    conditions = [
        MessageRow.conversation_id == conversation_id,
        MessageRow.status == "pending",
        MessageRow.role == "assistant",
        or_(MessageRow.fence.is_(None), MessageRow.fence < fence),
    ]
    if not with_empty:
        conditions.append(length(MessageRow.parts) > 0)
    query = select(MessageRow.id, MessageRow.parts).where(*conditions)
    return query.with_for_update() if dialect == "postgresql" else query


def takeover_statement(
    dialect: str, *, conversation_id: str, fence: int, reason: str, now: datetime
) -> TextClause:
    """Return the takeover ``UPDATE ... RETURNING id`` for ``dialect``."""
    params = (
        bindparam("now", now, type_=UtcDateTime()),
        bindparam("fence", fence, type_=BigInteger()),
        bindparam("conversation_id", conversation_id, type_=String()),
    )
    part = takeover_error_part(reason)
    if dialect == "sqlite":
        text_part = bindparam("part", orjson.dumps(part).decode(), type_=String())
        return text(SQLITE_TAKEOVER_SQL).bindparams(*params, text_part)
    if dialect == "postgresql":
        json_part = bindparam("part", part, type_=JSONB())
        return text(POSTGRESQL_TAKEOVER_SQL).bindparams(*params, json_part)
    raise PersistenceError(f"no takeover statement for dialect {dialect!r}")


def pending_conversations_statement(limit: int) -> TextClause:
    """Return the ``SELECT`` of (at most ``limit``) conversation ids with pending answers."""
    return text(_PENDING_CONVERSATIONS_SQL).bindparams(bindparam("limit", limit, type_=Integer()))
