"""Smoke test of the runtime benchmarks: each runs at a tiny size and ends with its JSON line.

The benches are scripts (``bench/*.py``), run here exactly as a user runs them: as subprocesses
of the current interpreter, all three at once to keep the test short. Only the shape of the
output is checked (the keys issue 2 names, and that every subscriber got every event); the
figures themselves belong to the benchmark runs, never to a test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A bench's own ``--timeout`` only turns a stall into a failure: on a loaded 2-core machine the
# streams take far longer than their nominal 0.3 s, so the bound is generous (it is no figure).
STALL_S = "240"
# All the benches at once on a busy machine: a bound for a hang, not a speed requirement.
RUN_TIMEOUT_S = 280

BENCHES: dict[str, tuple[list[str], set[str]]] = {
    "latency": (
        ["--streams", "5", "--deltas", "10", "--interval", "0.005"],
        {"p50_ms", "p99_ms", "hop_baseline_p50_ms", "p50_ratio", "p99_ratio"},
    ),
    "live_streams_http": (
        ["--http", "--streams", "20", "--interval", "0.01", "--chunks", "30", "--timeout", STALL_S],
        {"rss_per_stream_kib", "chunks_per_cpu_s", "ratio_vs_bare", "keeps_up_ratio"},
    ),
    "live_streams_full": (
        [
            *("--full", "--streams", "5", "--ttft-streams", "3", "--chunks", "2"),
            *("--full-rate", "5", "--profile", "--diagnose"),
        ],
        {
            "full_rss_per_stream_kib",
            "full_ttft_p50_s",
            "full_ttft_p99_s",
            "full_admissions_per_s",
            "full_ttft_together_p50_s",
            "full_frames_per_stream",
        },
    ),
    "fanout": (
        ["--subscribers", "20", "--deltas", "50", "--repeat", "1"],
        {"events_per_s", "baseline_events_per_s", "ratio"},
    ),
    "live_streams": (
        [
            "--streams",
            "30",
            "--interval",
            "0.01",
            "--chunks",
            "30",
            "--timeout",
            STALL_S,
            "--checkpoint-streams",
            "20",
            "--checkpoint-repeat",
            "1",
            "--checkpoint-chunks",
            "8",
        ],
        {
            "live_streams",
            "rss_per_stream_kib",
            "chunks_per_s",
            "expected_chunks_per_s",
            "baseline_rss_per_stream_kib",
            "checkpoint_cost_ratio",
            "chunks_per_cpu_s",
            "ratio_vs_bare",
            "keeps_up_ratio",
        },
    ),
    "boot": (
        ["--runs", "1"],
        {"boot_s", "cold_boot_s", "cpu_s", "floor_s", "ratio_vs_floor", "cpu_ratio_vs_floor"},
    ),
    "status_records": (
        ["--conversations", "300", "--cap", "100", "--batch", "100"],
        {"status_records", "baseline_status_records", "status_bytes", "ratio"},
    ),
    "cluster_log": (
        ["--deltas", "200"],
        {
            "redis_bytes_per_text_byte",
            "redis_stored_bytes_per_text_byte",
            "write_bytes_per_text_byte_at_200_per_s",
            "baseline_bytes_per_text_byte",
            "text_bytes",
        },
    ),
    "cluster_status": (
        ["--changes", "300"],
        {"changes_per_s", "baseline_changes_per_s", "ratio", "bytes_per_change"},
    ),
    "cluster_memory": (
        [],
        {
            "typical_text_bytes",
            "typical_entries_at_50_per_s",
            "typical_memory_bytes_at_50_per_s",
            "typical_baseline_memory_bytes",
        },
    ),
    "replay": (
        ["--deltas", "400", "--repeat", "2"],
        {"replay_ms", "bytes_ratio", "resume_ms", "resume_bytes_ratio"},
    ),
}


def _script(name: str) -> str:
    """``live_streams_http`` is ``live_streams.py --http``, ``live_streams_full`` ``--full``."""
    return name.removesuffix("_http").removesuffix("_full")


def _run_all() -> dict[str, dict[str, Any]]:
    procs = {
        name: subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / f"{_script(name)}.py"), "--quick", *flags],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, (flags, _) in BENCHES.items()
    }
    out: dict[str, dict[str, Any]] = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
        assert proc.returncode == 0, f"{name} failed:\n{stderr}"
        lines = stdout.strip().splitlines()
        assert len(lines) >= 2, f"{name} printed no human-readable lines before its JSON"
        out[name] = json.loads(lines[-1])
    return out


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S + 20)
def test_each_bench_prints_its_figures_as_a_json_last_line() -> None:
    results = _run_all()
    for name, (_, keys) in BENCHES.items():
        summary = results[name]
        assert summary["bench"] == _script(name)
        assert keys <= summary.keys(), f"{name} lacks {keys - summary.keys()}"
        for key in keys:
            assert isinstance(summary[key], int | float), (name, key, summary[key])
    fanout = results["fanout"]
    assert fanout["events_per_run"] == 20 * 56  # 50 deltas + 6 envelope chunks, to everyone
    live = results["live_streams"]
    assert live["live_streams"] == 30
    assert live["reached_target"] is True
    assert live["overflowed_subscribers"] == 0
    full = results["live_streams_full"]
    assert full["live_streams"] == 5  # every answer was live when measured (or the bench fails)
    assert full["full_frames_per_stream"] >= 3  # start, step, text-start and the first delta
    profile = full["full_profile"]  # traced from the idle mark to the live snapshot
    assert profile["traced_bytes"] > 0 and profile["by_line"]
    packages = {row["where"] for row in profile["by_package"]}
    assert any(name.startswith("drupe.") for name in packages), packages
    heap = full["full_diagnosis"]  # the server's heap, idle mark to live mark, per answer
    assert heap["gc_objects"] > 0  # 5 answers: the byte figures are noise at this size
    assert {"pymalloc_blocks_kib", "pymalloc_arenas_kib", "c_heap_kib"} <= set(heap)
    assert {row["type"] for row in heap["types"]} >= {"coroutine"}  # each answer awaits
    http = results["live_streams_http"]
    assert http["live_streams"] == 20
    assert http["reached_target"] is True
    # Every chunk published reached its SSE connection (plus the replayed start and [DONE]).
    assert http["frames_received"] >= http["chunks_published"]
    assert results["latency"]["samples"] == 5 * 10
    records = results["status_records"]
    assert records["baseline_status_records"] == 300
    assert records["status_records"] == 100
    replay = results["replay"]
    assert replay["replay_events"] > 0
    assert replay["resume_events"] > 0
    assert replay["bytes_ratio"] >= 1.0


CLUSTER_FANOUT_FLAGS = [
    "--subscribers", "20", "--words", "30", "--repeat", "1", "--pause", "4",
    "--paced-words", "20", "--lease-ttl", "2", "--takeovers", "1",
    "--streams", "10", "--concurrency", "5", "--scaling-repeat", "1",
]  # fmt: skip


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_cluster_fanout_prints_its_figures() -> None:
    """``bench/cluster_fanout.py`` (real ``drupe serve`` nodes on a fresh PostgreSQL database and
    a private ``redis-server``) at a tiny size: every figure issue 9 names is in its JSON line."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "cluster_fanout.py"), "--quick",
         *CLUSTER_FANOUT_FLAGS],
        cwd=ROOT, capture_output=True, text=True, timeout=220,
    )  # fmt: skip
    assert proc.returncode == 0, (
        f"cluster_fanout failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    )
    lines = proc.stdout.strip().splitlines()
    assert len(lines) >= 2, "no human-readable lines before the JSON"
    summary = json.loads(lines[-1])
    assert summary["bench"] == "cluster_fanout"
    keys = {
        "events_per_s",
        "baseline_events_per_s",
        "ratio",
        "cpu_ratio",
        "redis_bytes_per_text_byte",
        "takeover_s",
        "lease_ttl_s",
        "goal_takeover_s",
        "streams_per_s_workers_1",
        "streams_per_s_workers_2",
        "throughput_scaling",
    }
    assert keys <= summary.keys(), keys - summary.keys()
    for key in keys:
        assert isinstance(summary[key], int | float), (key, summary[key])
        # cpu_ratio: at this tiny size a CPU window can be below the kernel's clock tick (0.01 s)
        assert summary[key] > 0 or key == "cpu_ratio", (key, summary[key])
    assert summary["lease_ttl_s"] == 2.0 and summary["goal_takeover_s"] == 4.0
    # The bench itself checks the text two readers got; here: one frame per delta on one node
    # (30 deltas and the envelope), at most as many on the cluster (it merges deltas).
    assert summary["baseline_frames_per_subscriber"] > 30
    assert 0 < summary["frames_per_subscriber"] <= summary["baseline_frames_per_subscriber"]
