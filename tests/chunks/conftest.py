"""Shared fixtures for the chunk tests: the recorded sequences and the Node runner."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import pytest

from drupe.chunks.partial_json import _js_int

FIXTURES = Path(__file__).parent / "fixtures"
NODE_DIR = Path(__file__).parents[1] / "node"


def load_sequences() -> dict[str, dict[str, Any]]:
    """Every recorded sequence: ``{name: {description, chunks, seed?, error?}}``."""
    return {path.stem: json.loads(path.read_text()) for path in sorted(FIXTURES.glob("*.json"))}


class NodeRunner(Protocol):
    """Runs a script of ``tests/node`` on a JSON array of inputs and returns its JSON array."""

    def __call__(
        self, cases: Sequence[Any], script: str = "accumulate.mjs"
    ) -> list[dict[str, Any]]: ...


@pytest.fixture(scope="session")
def read_ui_message_stream() -> NodeRunner:
    """Run a ``tests/node`` script (default: ``accumulate.mjs``) on many cases in one process."""
    node = shutil.which("node")
    npm = shutil.which("npm")
    assert node is not None and npm is not None, "the Node cross-check needs node and npm on PATH"
    if not (NODE_DIR / "node_modules" / "ai" / "package.json").exists():
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=NODE_DIR, check=True
        )

    def run(cases: Sequence[Any], script: str = "accumulate.mjs") -> list[dict[str, Any]]:
        done = subprocess.run(
            [node, str(NODE_DIR / script)],
            input=json.dumps(list(cases)).encode(),
            capture_output=True,
            check=True,
            timeout=120,
        )
        # JSON.parse turns integers beyond 2**53 into doubles; read them back the same way
        results: list[dict[str, Any]] = json.loads(done.stdout, parse_int=_js_int)
        return results

    return run
