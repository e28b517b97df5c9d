"""The one way a store talks to the database: ``Transactions.read()`` / ``.write()``.

A store opens exactly one transaction per public call. Everything inside commits together or not
at all; a ``DrupeError`` raised inside rolls back and propagates unchanged, and any SQLAlchemy or
driver failure, or a lost connection to the server (``OSError``, e.g. a reset while the pool
checks a connection out), rolls back and becomes ``PersistenceError`` (the cause is chained;
the HTTP edge answers 503). Cancellation
rolls back and propagates. Nothing here logs or retries.

SQLite admits one writer at a time. Left alone, concurrent writers of one process collide on the
file lock and wait in SQLite's busy handler, which sleeps in growing steps (up to 100 ms); so on
SQLite ``write()`` first takes an in-process ``anyio.Lock`` and writers queue in FIFO order
instead. ``busy_timeout`` still covers other processes. PostgreSQL writers are not serialised.
Reads never take the lock (WAL readers do not block the writer).

``write_connection()`` is ``write()`` without the ORM session: a Core connection in one
transaction, for batch statements on hot paths (the checkpoints of live answers), where the
session's own bookkeeping would cost more than the statement.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker

from drupe.errors import PersistenceError

__all__ = ["Sessions", "Transactions"]


class _NoLock:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None


_NO_LOCK = _NoLock()

Sessions = async_sessionmaker[AsyncSession]


class Transactions:
    """Opens store transactions on one database. Safe to share between tasks."""

    def __init__(
        self, sessions: Sessions, *, serialize_writes: bool, engine: AsyncEngine | None = None
    ) -> None:
        self.sessions = sessions
        self._engine = engine
        self._write_lock = anyio.Lock() if serialize_writes else None

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        """Yield a DB session for reads inside one transaction."""
        async with self._translated() as db:
            yield db

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncSession]:
        """Yield a DB session inside one transaction that writes; commits on a clean exit."""
        if self._write_lock is None:
            async with self._translated() as db:
                yield db
            return
        async with self._write_lock, self._translated() as db:
            yield db

    @asynccontextmanager
    async def write_connection(self) -> AsyncIterator[AsyncConnection]:
        """Yield a Core connection inside one transaction that writes (no ORM session)."""
        if self._engine is None:
            async with self.write() as db:
                yield await db.connection()
            return
        async with self._write_lock or _NO_LOCK:
            try:
                async with self._engine.begin() as conn:
                    yield conn
            except (SQLAlchemyError, OSError) as err:
                raise _translate(err) from err

    @asynccontextmanager
    async def _translated(self) -> AsyncIterator[AsyncSession]:
        try:
            async with self.sessions.begin() as db:
                yield db
        except (SQLAlchemyError, OSError) as err:
            raise _translate(err) from err


def _translate(err: SQLAlchemyError | OSError) -> PersistenceError:
    if isinstance(err, OSError):
        return PersistenceError(f"the database is unavailable: {err.__class__.__name__}: {err}")
    return PersistenceError(f"database operation failed: {err.__class__.__name__}: {err}")
