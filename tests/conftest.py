"""Suite-wide fixtures: pin anyio's pytest plugin to the asyncio backend."""

from __future__ import annotations

import pytest
from hypothesis import settings

# Deterministic property tests: the same examples on every run (CI must never flake), no
# example database written into the tree.
settings.register_profile("drupe", derandomize=True, database=None, print_blob=True)
settings.load_profile("drupe")


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"
