"""Alembic: open migrates to head; the migration matches the ORM metadata; down and up again."""

from __future__ import annotations

from typing import Any, Protocol

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, inspect

from drupe.persistence import migrate, open_database, upgrade
from drupe.persistence.tables import Base


class Target(Protocol):
    """What the ``target`` fixture of ``conftest.py`` yields."""

    url: str
    connect_args: dict[str, Any]


TABLES = {"alembic_version", "agent_sessions", "agents", "api_keys", "conversations", "messages"}


def _table_names(conn: Connection) -> set[str]:
    return set(inspect(conn).get_table_names())


def _schema_diff(conn: Connection) -> list[Any]:
    return list(compare_metadata(MigrationContext.configure(conn), Base.metadata))


async def test_open_migrates_to_head_and_matches_the_metadata(target: Target) -> None:
    async with (
        open_database(target.url, connect_args=target.connect_args) as database,
        database.engine.connect() as conn,
    ):
        assert await conn.run_sync(migrate.current_revision) == migrate.head_revision()
        assert await conn.run_sync(_table_names) == TABLES
        assert await conn.run_sync(_schema_diff) == []


async def test_downgrade_to_base_and_upgrade_again(target: Target) -> None:
    async with open_database(target.url, connect_args=target.connect_args) as database:
        conversation = await database.conversations.create()
        async with database.engine.begin() as conn:
            await conn.run_sync(migrate.downgrade, "base")
        async with database.engine.connect() as conn:
            assert await conn.run_sync(_table_names) <= {"alembic_version"}
            assert await conn.run_sync(migrate.current_revision) is None

    assert await upgrade(target.url, connect_args=target.connect_args) == migrate.head_revision()
    async with open_database(target.url, connect_args=target.connect_args) as database:
        assert await database.conversations.get(conversation.id) is None
        assert await database.conversations.create(conversation.id) is not None


async def test_reopening_keeps_data_and_migrates_nothing(target: Target) -> None:
    async with open_database(target.url, connect_args=target.connect_args) as database:
        created = await database.conversations.create(title="kept")
    async with open_database(target.url, connect_args=target.connect_args) as database:
        assert await database.conversations.get(created.id) == created
