"""Fixtures of the agent-session tests: the persistence ``target``/``database`` fixtures."""

from __future__ import annotations

from tests.persistence.conftest import database, target

__all__ = ["database", "target"]
