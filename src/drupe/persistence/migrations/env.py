"""Alembic environment for Drupe's schema.

Drupe runs migrations through ``drupe.persistence.migrate`` with a live connection in
``config.attributes["connection"]``. The command-line fallback (``alembic -c
src/drupe/persistence/migrations/alembic.ini ...`` with ``DRUPE_DATABASE_URL`` set) exists for
writing new revisions; it builds its own async engine.
"""

from __future__ import annotations

import asyncio
import os

from alembic import context
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from drupe.persistence.tables import Base

target_metadata = Base.metadata


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_from_url(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_configure)
    finally:
        await engine.dispose()


def _run() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        return
    from drupe.persistence.db import database_url

    url = database_url(os.environ.get("DRUPE_DATABASE_URL"))
    if context.is_offline_mode():
        context.configure(url=url, target_metadata=target_metadata, literal_binds=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    asyncio.run(_run_from_url(url))


_run()
