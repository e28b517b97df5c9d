"""Alembic, driven programmatically: the schema is brought to ``head`` on every open.

Owns the Alembic ``Config`` (``script_location`` is the ``migrations`` directory inside this
package, so an installed wheel migrates without an ``alembic.ini``) and the sync entry points
that ``drupe.persistence.db`` runs through ``AsyncConnection.run_sync``. On PostgreSQL the
migration holds a transaction-scoped advisory lock, so two processes starting together never
migrate at once. Never call these functions on a connection that is not inside a transaction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text

__all__ = [
    "MIGRATIONS_DIR",
    "alembic_config",
    "current_revision",
    "downgrade",
    "head_revision",
    "upgrade",
]

MIGRATIONS_DIR: Final = Path(__file__).with_name("migrations")
_PG_MIGRATION_LOCK: Final = 0x64727570650001  # "drupe" + 1: one advisory lock id for migrations


def alembic_config(connection: Connection | None = None) -> Config:
    """Return an Alembic config for Drupe's migrations, bound to ``connection`` if given."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """Return the newest revision id shipped with this version of Drupe."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the migrations directory holds at least one revision"
    return head


def current_revision(connection: Connection) -> str | None:
    """Return the revision the database is at (``None`` for an empty database)."""
    return MigrationContext.configure(connection).get_current_revision()


def upgrade(connection: Connection, revision: str = "head") -> None:
    """Migrate the database behind ``connection`` up to ``revision`` (idempotent)."""
    _lock(connection)
    if revision == "head" and current_revision(connection) == head_revision():
        return
    command.upgrade(alembic_config(connection), revision)


def downgrade(connection: Connection, revision: str) -> None:
    """Migrate the database behind ``connection`` down to ``revision`` (``"base"`` empties it)."""
    _lock(connection)
    command.downgrade(alembic_config(connection), revision)


def _lock(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
