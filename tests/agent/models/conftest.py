"""Fixtures for the model-layer tests: an empty environment and a temporary config file."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    return tmp_path / "config.toml"
