"""Fixtures of the task tests: ``tasks`` is ``support.open_tasks`` on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.persistence.conftest import Target, database, target
from tests.tasks.support import TasksEnv, open_tasks

__all__ = ["database", "target", "tasks"]


@pytest.fixture
async def tasks(target: Target) -> AsyncIterator[TasksEnv]:
    async with open_tasks(target.url, connect_args=target.connect_args) as environment:
        yield environment
