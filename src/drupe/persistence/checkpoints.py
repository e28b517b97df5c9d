"""The checkpoint statement: a live answer's parts written into its ``pending`` row.

``checkpoint_statement(dialect, fenced=...)`` is ONE ``UPDATE`` run as an executemany over a
batch of rows (``MessageStore.write_checkpoints``). It only touches rows that are still
``pending``: a checkpoint that reaches the database after the terminal write (or after a
reconcile or a takeover) changes nothing. The parts arrive as JSON text, serialized once by the
checkpointer, so no JSON is processed twice; on PostgreSQL the text is cast to ``jsonb`` (U+0000
made safe first, ``drupe.persistence.json_text``).

The fenced variant (cluster mode) also requires the row's ``fence`` to be NULL or not above the
writer's token (``:fence``) and stores that token, in the same statement: an owner that lost its
lease (a successor took the row over with a higher token) changes nothing. ``FencedCheckpoints``
is the checkpoint sink of one token (``MessageStore.fenced_checkpoints``): it satisfies
``drupe.streaming.checkpoints.CheckpointSink`` and writes every batch with its fence.
``write_checkpoint_batch`` runs one batch in one transaction (``MessageStore`` delegates to it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Protocol

from sqlalchemy import BigInteger, BindParameter, String, TextClause, bindparam, text

from drupe.errors import PersistenceError
from drupe.persistence.json_text import jsonb_safe
from drupe.persistence.transaction import Transactions

__all__ = [
    "POSTGRESQL_CHECKPOINT_SQL",
    "FencedCheckpoints",
    "POSTGRESQL_FENCED_CHECKPOINT_SQL",
    "SQLITE_CHECKPOINT_SQL",
    "SQLITE_FENCED_CHECKPOINT_SQL",
    "checkpoint_statement",
    "write_checkpoint_batch",
]

SQLITE_CHECKPOINT_SQL: Final = """
UPDATE messages SET parts = :parts
WHERE id = :id AND status = 'pending'
"""

POSTGRESQL_CHECKPOINT_SQL: Final = """
UPDATE messages SET parts = CAST(:parts AS jsonb)
WHERE id = :id AND status = 'pending'
"""

SQLITE_FENCED_CHECKPOINT_SQL: Final = """
UPDATE messages SET parts = :parts, fence = :fence
WHERE id = :id AND status = 'pending' AND (fence IS NULL OR fence <= :fence)
"""

POSTGRESQL_FENCED_CHECKPOINT_SQL: Final = """
UPDATE messages SET parts = CAST(:parts AS jsonb), fence = :fence
WHERE id = :id AND status = 'pending' AND (fence IS NULL OR fence <= :fence)
"""

_SQL: Final = {
    ("sqlite", False): SQLITE_CHECKPOINT_SQL,
    ("postgresql", False): POSTGRESQL_CHECKPOINT_SQL,
    ("sqlite", True): SQLITE_FENCED_CHECKPOINT_SQL,
    ("postgresql", True): POSTGRESQL_FENCED_CHECKPOINT_SQL,
}


def checkpoint_statement(dialect: str, *, fenced: bool = False) -> TextClause:
    """Return the checkpoint ``UPDATE`` for ``dialect`` (``"sqlite"`` or ``"postgresql"``);
    ``fenced`` adds the fencing guard (then every row's parameters carry ``fence``)."""
    sql = _SQL.get((dialect, fenced))
    if sql is None:
        raise PersistenceError(f"no checkpoint statement for dialect {dialect!r}")
    types: list[BindParameter[Any]] = [
        bindparam("parts", type_=String()),
        bindparam("id", type_=String()),
    ]
    if fenced:
        types.append(bindparam("fence", type_=BigInteger()))
    return text(sql).bindparams(*types)


async def write_checkpoint_batch(
    transactions: Transactions, dialect: str, batch: Sequence[tuple[str, str]], fence: int | None
) -> int:
    """Write ``(message id, parts JSON text)`` into rows still ``pending`` in one transaction
    and one executemany; return the rows changed (the batch size on PostgreSQL, whose driver
    reports no count for an executemany). With ``fence``, rows fenced above it are skipped."""
    if not batch:
        return 0
    safe = jsonb_safe if dialect == "postgresql" else str
    params: list[dict[str, Any]] = [{"id": key, "parts": safe(parts)} for key, parts in batch]
    if fence is not None:
        for param in params:
            param["fence"] = fence
    statement = checkpoint_statement(dialect, fenced=fence is not None)
    async with transactions.write_connection() as conn:
        result = await conn.execute(statement, params)
        count = result.rowcount
    return count if count >= 0 else len(batch)


class _CheckpointWriter(Protocol):
    async def write_checkpoints(
        self, batch: Sequence[tuple[str, str]], *, fence: int | None = None
    ) -> int: ...


class FencedCheckpoints:
    """Checkpoints of the rows one owner writes with fencing token ``fence``."""

    __slots__ = ("__weakref__", "fence", "store")

    def __init__(self, store: _CheckpointWriter, fence: int) -> None:
        self.store = store
        self.fence = fence

    async def write_checkpoints(self, batch: Sequence[tuple[str, str]]) -> int:
        """Write the batch into rows still ``pending`` and not fenced above ``fence``."""
        return await self.store.write_checkpoints(batch, fence=self.fence)
