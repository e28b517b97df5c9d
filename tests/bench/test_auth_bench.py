"""Smoke test of ``bench/auth.py`` (issue 20): a tiny ``--quick`` run prints its figures.

The bench runs as a user runs it (a subprocess of the current interpreter). Checked: the human
lines and the JSON last line with every figure; what the bench's own setup guarantees whatever
the load (a database lookup per request costs more than the cached one; the watcher got the
answer's deltas; the identity tables are not read per chunk). The CPU figures themselves belong
to the benchmark runs, never to a test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FLAGS = [
    "--quick", "--requests", "40", "--uncached-requests", "20", "--rounds", "1",
    "--gate-calls", "300", "--stream-seconds", "0.4", "--chunks-small", "10",
    "--chunks-large", "80",
]  # fmt: skip

KEYS = {
    "us_per_request_off",
    "us_per_request_session",
    "us_per_request_token",
    "us_per_request_uncached",
    "added_us_session",
    "added_us_token",
    "added_us_uncached",
    "ratio_session",
    "ratio_token",
    "gate_us_off",
    "gate_us_session",
    "gate_us_token",
    "gate_added_us_session",
    "gate_added_us_token",
    "stream_statements_small",
    "stream_statements_large",
    "stream_auth_statements_small",
    "stream_auth_statements_large",
    "stream_frames_small",
    "stream_frames_large",
    "stream_attach_statements_small",
    "stream_attach_auth_statements_small",
}


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_auth_bench_prints_its_figures() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "auth.py"), *FLAGS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, f"failed:\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}"
    lines = proc.stdout.strip().splitlines()
    assert any(line.startswith("GET /api/limits") for line in lines[:-1])
    summary = json.loads(lines[-1])
    assert summary["bench"] == "auth"
    assert summary.keys() >= KEYS, KEYS - summary.keys()
    for key in KEYS:
        assert isinstance(summary[key], int | float), (key, summary[key])
    assert summary["requests"] == 40 and summary["route"] == "/api/limits"
    assert summary["us_per_request_off"] > 0
    # Without the cache every request reads the session and its user from the database.
    assert summary["added_us_uncached"] > summary["added_us_session"]
    # The watcher got the answers (a few first deltas may arrive merged by the replay).
    assert 0 < summary["stream_frames_small"] <= 10
    assert summary["stream_frames_small"] < summary["stream_frames_large"] <= 80
    assert summary["stream_chunks_large"] == 80
    # Authorization is decided when the watcher attaches (the session lookup is cached, so at
    # most one statement), never per chunk: 80 chunks would make 80 statements or more. A
    # periodic revocation sweep (sessions, tokens) may run once in a 0.4 s window.
    assert summary["stream_attach_auth_statements_small"] <= 1
    assert summary["stream_auth_statements_small"] <= 2
    assert summary["stream_auth_statements_large"] <= 2
    assert summary["stream_auth_grows_with_chunks"] is False
    assert isinstance(summary["meets_goal"], bool)
