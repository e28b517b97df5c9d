"""The one way a store talks to the database: ``transaction(sessions)``.

A store opens exactly one transaction per public call. Everything inside commits together or not
at all; a ``DrupeError`` raised inside rolls back and propagates unchanged, and any SQLAlchemy or
driver failure rolls back and becomes ``PersistenceError`` (the cause is chained). Cancellation
rolls back and propagates. Nothing here logs or retries.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from drupe.errors import PersistenceError

__all__ = ["Sessions", "transaction"]

Sessions = async_sessionmaker[AsyncSession]


@asynccontextmanager
async def transaction(sessions: Sessions) -> AsyncIterator[AsyncSession]:
    """Yield a DB session inside one transaction, committed when the block exits cleanly."""
    try:
        async with sessions.begin() as db:
            yield db
    except SQLAlchemyError as err:
        raise PersistenceError(
            f"database operation failed: {err.__class__.__name__}: {err}"
        ) from err
