"""Fixtures of the agent-session tests.

``database``/``target`` are the persistence fixtures (SQLite and PostgreSQL); ``env`` is the
runtime of ``support.open_env`` on a SQLite file.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.persistence.conftest import database, target
from tests.sessions.support import Env, open_env

__all__ = ["database", "env", "target"]


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with open_env(f"sqlite+aiosqlite:///{tmp_path / 'drupe.db'}") as environment:
        yield environment
