"""Fixtures: ``drupe serve`` as a real process (one per test module)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``drupe serve`` as a real process on a free port (one per module); yields its URL."""
    tmp_path = tmp_path_factory.mktemp("serve")
    config = tmp_path / "config.toml"
    config.write_text('default_model = "scripted:echo"\n')
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "drupe", "serve", "--port", "0", "--data-dir", str(tmp_path),
         "--config", str(config), "--no-auth"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "Open http://127.0.0.1:" in line, line + (
            process.stderr.read() if process.stderr else ""
        )
        yield line.split("Open ", 1)[1].strip()
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        finally:
            if process.poll() is None:
                process.kill()
    # uvicorn re-raises the signal it shut down on: an orderly exit by SIGINT is 130 / -2.
    assert process.returncode in (0, 130, -signal.SIGINT)
    assert process.stderr is not None and "Application shutdown complete" in process.stderr.read()
