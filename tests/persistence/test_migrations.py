"""Alembic: open migrates to head; the migration matches the ORM metadata; down and up again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Protocol

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, inspect

from drupe.persistence import NewMessage, NewPlaceholder, migrate, open_database, upgrade
from drupe.persistence.search import SEARCH_OBJECTS
from drupe.persistence.tables import Base


class Target(Protocol):
    """What the ``target`` fixture of ``conftest.py`` yields."""

    url: str
    connect_args: dict[str, Any]


TABLES = {
    "alembic_version",
    "agent_sessions",
    "agents",
    "api_keys",
    "audit_log",
    "auth_sessions",
    "channel_bindings",
    "channel_deliveries",
    "chat_link_codes",
    "conversations",
    "gateway_responses",
    "gateway_usage",
    "messages",
    "oidc_logins",
    "provider_settings",
    "schedules",
    "shares",
    "sign_in_links",
    "task_runs",
    "user_identities",
    "user_tokens",
    "users",
}


def _table_names(conn: Connection) -> set[str]:
    # The search index's FTS5 tables (and their shadow tables) are not in the metadata.
    return {
        name
        for name in inspect(conn).get_table_names()
        if not name.startswith(tuple(SEARCH_OBJECTS))
    }


def _not_search(name: str | None, kind: str, parent: Any) -> bool:
    return name is None or not name.startswith(tuple(SEARCH_OBJECTS))


def _schema_diff(conn: Connection) -> list[Any]:
    context = MigrationContext.configure(conn, opts={"include_name": _not_search})
    return list(compare_metadata(context, Base.metadata))


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


def test_the_shipped_head_read_from_the_files_is_alembics_head() -> None:
    assert migrate.shipped_head() == migrate.head_revision()


async def test_a_database_at_head_reports_its_stored_revision(target: Target) -> None:
    async with (
        open_database(target.url, connect_args=target.connect_args) as database,
        database.engine.connect() as conn,
    ):
        assert await conn.run_sync(migrate.stored_revision) == migrate.head_revision()


def test_reopening_a_migrated_database_does_not_import_alembic(tmp_path: Path) -> None:
    """A restart on a database at head skips Alembic (and Mako, Pygments) entirely."""
    script = (
        "import sys, anyio\n"
        "from drupe.persistence import open_database\n"
        "async def main():\n"
        f"    async with open_database(data_dir=__import__('pathlib').Path({str(tmp_path)!r})):\n"
        "        pass\n"
        "anyio.run(main)\n"
        "print('alembic' in sys.modules)\n"
    )
    first = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "True"  # a fresh database is migrated by Alembic
    again = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "False"


def _message_columns(conn: Connection) -> set[str]:
    return {column["name"] for column in inspect(conn).get_columns("messages")}


async def test_0006_adds_the_fence_to_a_0005_database_with_its_rows_intact(
    target: Target,
) -> None:
    async with open_database(target.url, connect_args=target.connect_args) as database:
        conversation = await database.conversations.create(title="kept")
        await database.messages.create_turn(
            conversation.id,
            user_message=NewMessage(id="u1", parts=[{"type": "text", "text": "q"}]),
            parent_id=None,
            placeholders=[
                NewPlaceholder(message_id="a1", model_id="m"),
                NewPlaceholder(message_id="a2", model_id=None),
            ],
        )
        await database.messages.finalize_assistant(
            "a1", parts=[{"type": "text", "text": "answer"}], status="success"
        )
        await database.messages.write_checkpoints([("a2", '[{"type":"text","text":"par"}]')])
        before = await database.messages.list_for_conversation(conversation.id)
        async with database.engine.begin() as conn:
            await conn.run_sync(migrate.downgrade, "0005")
        async with database.engine.connect() as conn:
            assert await conn.run_sync(migrate.current_revision) == "0005"
            assert "fence" not in await conn.run_sync(_message_columns)

    async with open_database(target.url, connect_args=target.connect_args) as database:
        async with database.engine.connect() as conn:
            assert await conn.run_sync(migrate.current_revision) == migrate.shipped_head()
            assert "fence" in await conn.run_sync(_message_columns)
        after = await database.messages.list_for_conversation(conversation.id)
        assert after == before
        assert [row.fence for row in after] == [None, None, None]
        assert await database.messages.pending_conversations() == [conversation.id]
        assert await database.messages.take_over(conversation.id, fence=1, reason="lost") == ["a2"]
