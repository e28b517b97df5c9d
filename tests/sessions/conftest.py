"""Fixtures of the agent-session tests.

``database``/``target`` are the persistence fixtures (SQLite and PostgreSQL); ``env`` is the
runtime of ``support.open_env`` on each of them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.persistence.conftest import Target, database, target
from tests.sessions.support import Env, open_env

__all__ = ["database", "env", "target"]


@pytest.fixture
async def env(target: Target) -> AsyncIterator[Env]:
    async with open_env(target.url, connect_args=target.connect_args) as environment:
        yield environment
