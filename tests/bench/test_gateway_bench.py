"""Smoke test of ``bench/gateway.py``: a tiny run (LiteLLM left out) ends with the JSON line
that issue 11 §1 names: the overheads over direct, the CPU over direct, and the per-level
figures at 1, 4 and 16 clients. The figures themselves belong to the benchmark runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_gateway_bench_prints_its_figures_as_a_json_last_line() -> None:
    run = subprocess.run(
        [
            *(sys.executable, str(ROOT / "bench" / "gateway.py"), "--quick", "--no-litellm"),
            *("--rounds", "3", "--per-worker", "1", "--repeats", "1"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.strip().splitlines()
    assert len(lines) >= 2, "no human-readable lines before the JSON"
    summary = json.loads(lines[-1])
    assert summary["bench"] == "gateway"
    for key in ("overhead_p50_ms", "overhead_p99_ms", "cpu_ms_over_direct"):
        assert isinstance(summary[key], int | float), (key, summary[key])
    assert summary["ratio_p50"] is None and summary["ratio_p99"] is None  # no LiteLLM
    assert summary["litellm_error"] == "LiteLLM left out (--no-litellm)"
    assert set(summary["concurrency"]) >= {"1", "4", "16"}
    for level in ("1", "4", "16"):
        for mode in ("non_streaming", "streaming"):
            entry = summary["concurrency"][level][mode]
            assert isinstance(entry["drupe_p50_ms"], int | float)
            assert isinstance(entry["drupe_p99_ms"], int | float)
    assert set(summary["goals_met"]) == {"overhead_p50", "overhead_p99", "cpu"}
    assert summary["passthrough"] is True
