"""The checkpoint statement: a live answer's parts written into its ``pending`` row.

``checkpoint_statement(dialect)`` is ONE ``UPDATE`` run as an executemany over a batch of rows
(``MessageStore.write_checkpoints``). It only touches rows that are still ``pending``: a
checkpoint that reaches the database after the terminal write (or after a reconcile) changes
nothing. The parts arrive as JSON text, serialized once by the checkpointer, so no JSON is
processed twice; on PostgreSQL the text is cast to ``jsonb`` (U+0000 made safe first,
``drupe.persistence.json_text``).
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import String, TextClause, bindparam, text

from drupe.errors import PersistenceError

__all__ = ["POSTGRESQL_CHECKPOINT_SQL", "SQLITE_CHECKPOINT_SQL", "checkpoint_statement"]

SQLITE_CHECKPOINT_SQL: Final = """
UPDATE messages SET parts = :parts
WHERE id = :id AND status = 'pending'
"""

POSTGRESQL_CHECKPOINT_SQL: Final = """
UPDATE messages SET parts = CAST(:parts AS jsonb)
WHERE id = :id AND status = 'pending'
"""


def checkpoint_statement(dialect: str) -> TextClause:
    """Return the checkpoint ``UPDATE`` for ``dialect`` (``"sqlite"`` or ``"postgresql"``)."""
    types = (
        bindparam("parts", type_=String()),
        bindparam("id", type_=String()),
    )
    if dialect == "sqlite":
        return text(SQLITE_CHECKPOINT_SQL).bindparams(*types)
    if dialect == "postgresql":
        return text(POSTGRESQL_CHECKPOINT_SQL).bindparams(*types)
    raise PersistenceError(f"no checkpoint statement for dialect {dialect!r}")
