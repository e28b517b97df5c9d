"""Suite-wide fixtures: pin anyio's pytest plugin to the asyncio backend."""

from __future__ import annotations

import os
import traceback

import pytest
from hypothesis import Phase, settings

from tests.private_redis import private_redis  # noqa: F401  (a fixture for every test)

# Deterministic property tests: the same examples on every run (CI must never flake), no
# example database written into the tree.
settings.register_profile("drupe", derandomize=True, database=None, print_blob=True)
# scripts/mutation: the same examples, but a failure is not shrunk (a killed mutant is all that
# counts there, and shrinking would cost most of the run).
settings.register_profile(
    "mutation",
    parent=settings.get_profile("drupe"),
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
)
settings.load_profile(os.environ.get("DRUPE_HYPOTHESIS_PROFILE", "drupe"))

# A failure inside nested task groups (a runtime's owners, each wrapping what its body raised)
# reaches pytest 10+ groups deep; the standard formatting stops at 10 and hides the cause.
_format_defaults = traceback.TracebackException.__init__.__kwdefaults__
if _format_defaults is not None and "max_group_depth" in _format_defaults:
    _format_defaults["max_group_depth"] = 100


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"
