"""Boot reconciliation: every ``pending`` assistant row left by a crash becomes ``error``.

Runs once at boot, before the first admission can write a new placeholder (invariant 3). A row
that holds checkpointed parts (``drupe.streaming.checkpoints``) keeps them, closed as
interrupted by ``close_checkpointed_parts``: streaming text and reasoning become ``done``, open
tool parts ``output-error``, empty text and transient ``data-retry`` parts are dropped. Only
those rows are read (``checkpointed_rows_statement``). Then one set-based ``UPDATE`` per dialect
settles every pending row, so the cost grows with the number of pending rows (found through the
partial index ``ix_messages_pending``), not with the size of the table. Each reconciled row
loses any ``data-error`` part it had and gains exactly one:
``{"type": "data-error", "data": {"name": "ServerRestart", "message": ...}}``.

The SQL is written out per dialect on purpose: the JSON functions differ (``json_each`` /
``json_insert`` on SQLite, ``jsonb_array_elements`` / ``||`` on PostgreSQL), and the literal
``status = 'pending'`` is what lets both planners use the partial index.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

import orjson
from sqlalchemy import Select, String, TextClause, bindparam, func, select, text
from sqlalchemy.dialects.postgresql import JSONB

from drupe.chunks.normalize import (
    drop_transient_parts,
    finalize_interrupted_parts,
    strip_empty_parts,
)
from drupe.errors import PersistenceError
from drupe.persistence.tables import MessageRow, UtcDateTime

__all__ = [
    "POSTGRESQL_RECONCILE_SQL",
    "RESTART_ERROR",
    "RESTART_ERROR_PART",
    "SQLITE_RECONCILE_SQL",
    "checkpointed_rows_statement",
    "close_checkpointed_parts",
    "reconcile_statement",
]

RESTART_ERROR: Final[dict[str, Any]] = {
    "name": "ServerRestart",
    "message": "The server stopped before this answer finished.",
}
RESTART_ERROR_PART: Final[dict[str, Any]] = {"type": "data-error", "data": RESTART_ERROR}

SQLITE_RECONCILE_SQL: Final = """
UPDATE messages
SET status = 'error',
    updated_at = :now,
    parts = json_insert(
        (SELECT json_group_array(json(part.value))
           FROM json_each(messages.parts) AS part
          WHERE json_extract(part.value, '$.type') IS NOT 'data-error'),
        '$[#]', json(:part))
WHERE status = 'pending' AND role = 'assistant'
"""

POSTGRESQL_RECONCILE_SQL: Final = """
UPDATE messages
SET status = 'error',
    updated_at = :now,
    parts = COALESCE(
        (SELECT jsonb_agg(part.value ORDER BY part.ordinality)
           FROM jsonb_array_elements(messages.parts) WITH ORDINALITY AS part(value, ordinality)
          WHERE part.value ->> 'type' IS DISTINCT FROM 'data-error'),
        '[]'::jsonb) || jsonb_build_array(:part)
WHERE status = 'pending' AND role = 'assistant'
"""


def reconcile_statement(dialect: str, now: datetime) -> TextClause:
    """Return the reconcile ``UPDATE`` for ``dialect`` (``"sqlite"`` or ``"postgresql"``)."""
    stamp = bindparam("now", now, type_=UtcDateTime())
    if dialect == "sqlite":
        part = bindparam("part", orjson.dumps(RESTART_ERROR_PART).decode(), type_=String())
        return text(SQLITE_RECONCILE_SQL).bindparams(stamp, part)
    if dialect == "postgresql":
        return text(POSTGRESQL_RECONCILE_SQL).bindparams(
            stamp, bindparam("part", RESTART_ERROR_PART, type_=JSONB())
        )
    raise PersistenceError(f"no reconcile statement for dialect {dialect!r}")


def checkpointed_rows_statement(dialect: str) -> Select[tuple[str, Any]]:
    """Select ``(id, parts)`` of the pending assistant rows that hold checkpointed parts."""
    length = func.jsonb_array_length if dialect == "postgresql" else func.json_array_length
    return select(MessageRow.id, MessageRow.parts).where(
        MessageRow.status == "pending",
        MessageRow.role == "assistant",
        length(MessageRow.parts) > 0,
    )


def close_checkpointed_parts(parts: Any) -> list[dict[str, Any]] | None:
    """Return the parts closed as interrupted, or ``None`` when nothing changes (pure)."""
    if not isinstance(parts, list):
        return None
    message: Any = {"id": "", "role": "assistant", "parts": parts}
    closed = strip_empty_parts(drop_transient_parts(finalize_interrupted_parts(message, "error")))
    closed_parts = closed["parts"]
    return None if closed_parts == parts else [dict(part) for part in closed_parts]
