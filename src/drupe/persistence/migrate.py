"""Alembic, driven programmatically: the schema is brought to ``head`` on every open.

Owns the Alembic ``Config`` (``script_location`` is the ``migrations`` directory inside this
package, so an installed wheel migrates without an ``alembic.ini``) and the sync entry points
that ``drupe.persistence.db`` runs through ``AsyncConnection.run_sync``. On PostgreSQL the
migration holds a transaction-scoped advisory lock, so two processes starting together never
migrate at once. Never call these functions on a connection that is not inside a transaction.

Alembic (with Mako and Pygments behind it) costs a large share of a boot, so it is imported only
when a migration has to run: ``upgrade`` to head first compares the database's stored revision
with ``shipped_head`` (read from the revision files' ``revision``/``down_revision`` lines, and
tested against Alembic's own answer), and a database already at head never imports Alembic.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Final

from sqlalchemy import Connection, inspect, text

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = [
    "MIGRATIONS_DIR",
    "alembic_config",
    "current_revision",
    "downgrade",
    "head_revision",
    "shipped_head",
    "stored_revision",
    "upgrade",
]

MIGRATIONS_DIR: Final = Path(__file__).with_name("migrations")
_PG_MIGRATION_LOCK: Final = 0x64727570650001  # "drupe" + 1: one advisory lock id for migrations


_REVISION_LINE = re.compile(
    r"^(down_revision|revision)\s*(?::[^=]+)?=\s*(?:\"([^\"]+)\"|'([^']+)'|None)\s*$", re.M
)


def alembic_config(connection: Connection | None = None) -> Config:
    """Return an Alembic config for Drupe's migrations, bound to ``connection`` if given."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """Return the newest revision id shipped with this version of Drupe."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the migrations directory holds at least one revision"
    return head


def current_revision(connection: Connection) -> str | None:
    """Return the revision the database is at (``None`` for an empty database)."""
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


@cache
def shipped_head() -> str | None:
    """The newest shipped revision, read from the revision files without importing Alembic.

    ``None`` when the files do not name exactly one head (then ``upgrade`` asks Alembic).
    """
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in sorted((MIGRATIONS_DIR / "versions").glob("*.py")):
        for match in _REVISION_LINE.finditer(path.read_text(encoding="utf-8")):
            value = match.group(2) or match.group(3)
            if value is None:
                continue
            (revisions if match.group(1) == "revision" else parents).add(value)
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def stored_revision(connection: Connection) -> str | None:
    """The revision stored in ``alembic_version``, by plain SQL (``None`` when there is none)."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    rows = connection.execute(text("SELECT version_num FROM alembic_version")).all()
    return str(rows[0][0]) if len(rows) == 1 else None


def upgrade(connection: Connection, revision: str = "head") -> None:
    """Migrate the database behind ``connection`` up to ``revision`` (idempotent)."""
    _lock(connection)
    if revision == "head":
        head = shipped_head()
        if head is not None and stored_revision(connection) == head:
            return  # at head: Alembic is never imported
        if current_revision(connection) == head_revision():
            return
    from alembic import command

    command.upgrade(alembic_config(connection), revision)


def downgrade(connection: Connection, revision: str) -> None:
    """Migrate the database behind ``connection`` down to ``revision`` (``"base"`` empties it)."""
    from alembic import command

    _lock(connection)
    command.downgrade(alembic_config(connection), revision)


def _lock(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
