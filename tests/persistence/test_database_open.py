"""Opening the database: URL normalisation, the default location, SQLite connection pragmas."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from drupe.errors import ConfigError, PersistenceError
from drupe.persistence import database_url, open_database


def test_postgres_urls_are_rewritten_to_asyncpg() -> None:
    for given in (
        "postgresql://u:p@h:5/db",
        "postgres://u:p@h:5/db",
        "postgresql+asyncpg://u:p@h:5/db",
    ):
        assert database_url(given) == "postgresql+asyncpg://u:p@h:5/db"
    assert database_url("sqlite:////tmp/x.db") == "sqlite+aiosqlite:////tmp/x.db"
    with pytest.raises(ConfigError, match="mysql"):
        database_url("mysql://h/db")
    with pytest.raises(ConfigError, match="malformed"):
        database_url("::not a url::")


def test_default_is_drupe_db_in_the_user_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert database_url() == f"sqlite+aiosqlite:///{tmp_path / 'xdg' / 'drupe' / 'drupe.db'}"
    assert (tmp_path / "xdg" / "drupe").is_dir()
    assert (
        database_url(data_dir=tmp_path / "d")
        == f"sqlite+aiosqlite:///{tmp_path / 'd' / 'drupe.db'}"
    )


async def _pragmas(engine: AsyncEngine) -> tuple[object, ...]:
    async with engine.connect() as conn:
        values = []
        for name in ("journal_mode", "foreign_keys", "busy_timeout", "synchronous"):
            values.append((await conn.execute(text(f"PRAGMA {name}"))).scalar_one())
        return tuple(values)


async def test_sqlite_file_in_data_dir_uses_wal_on_every_connection(tmp_path: Path) -> None:
    async with open_database(data_dir=tmp_path) as database:
        assert database.dialect == "sqlite"
        assert (tmp_path / "drupe.db").is_file()
        results: list[tuple[object, ...]] = []
        # Hold one connection while opening others, so the pool creates several.
        async with database.engine.connect(), anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(lambda: _append(results, database.engine))
        assert len(results) == 3
        # journal_mode WAL, foreign_keys ON, busy_timeout 5000 ms, synchronous NORMAL (1)
        assert set(results) == {("wal", 1, 5000, 1)}
        await database.conversations.create("c1")
    assert (tmp_path / "drupe.db").stat().st_size > 0


async def _append(results: list[tuple[object, ...]], engine: AsyncEngine) -> None:
    results.append(await _pragmas(engine))


async def test_unreachable_databases_raise_persistence_error(tmp_path: Path) -> None:
    with pytest.raises(PersistenceError, match=r"\*\*\*") as caught:
        async with open_database("postgresql://drupe:secret@127.0.0.1:1/none"):
            pass
    assert "secret" not in str(caught.value)
    with pytest.raises(PersistenceError):
        async with open_database(f"sqlite:///{tmp_path / 'missing' / 'dir' / 'x.db'}"):
            pass


async def test_in_memory_sqlite_is_one_shared_database() -> None:
    async with open_database("sqlite://") as database:
        async with anyio.create_task_group() as tg:
            for n in range(5):
                tg.start_soon(database.conversations.create, f"c{n}")
        assert len(await database.conversations.list()) == 5
