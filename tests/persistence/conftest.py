"""Fixtures: every persistence test runs against SQLite (a file) and PostgreSQL.

PostgreSQL is the shared server named by ``DRUPE_TEST_POSTGRES_URL`` (default
``postgresql+asyncpg://postgres@127.0.0.1:5432/test``). Each test gets its own schema, selected
through ``search_path`` in the driver's connect arguments, and the schema is dropped afterwards,
so tests never see each other's rows or the tables of other test modules.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from drupe.persistence import Database, open_database

DEFAULT_POSTGRES_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"


@dataclass(frozen=True)
class Target:
    """A database to open: its URL and the driver arguments that isolate it."""

    dialect: str
    url: str
    connect_args: dict[str, Any] = field(default_factory=dict)


def _postgres_dsn() -> tuple[str, str]:
    url = make_url(os.environ.get("DRUPE_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL))
    sqlalchemy_url = url.set(drivername="postgresql+asyncpg")
    plain = url.set(drivername="postgresql")
    return (
        sqlalchemy_url.render_as_string(hide_password=False),
        plain.render_as_string(hide_password=False),
    )


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
async def target(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Target]:
    if request.param == "sqlite":
        yield Target("sqlite", f"sqlite+aiosqlite:///{tmp_path / 'drupe.db'}")
        return
    url, dsn = _postgres_dsn()
    schema = f"drupe_test_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(dsn)
    try:
        await admin.execute(f'CREATE SCHEMA "{schema}"')
        yield Target("postgresql", url, {"server_settings": {"search_path": schema}})
    finally:
        await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await admin.close()


@pytest.fixture
async def database(target: Target) -> AsyncIterator[Database]:
    async with open_database(target.url, connect_args=target.connect_args) as db:
        yield db
