"""Benchmark P6: boot reconcile of 1,000 pending rows among 100,000 messages on SQLite.

Builds a fresh SQLite file (schema through ``open_database``, rows through bulk ``executemany``
inserts with the stdlib driver): 1,000 conversations of 100 messages each, alternating user and
assistant rows with realistic text parts; the last assistant row of each conversation is
``pending`` (as after a crash that interrupted 1,000 live streams). Then it times what a boot does:
``open_database`` (engine, pragmas, migration check) + ``reconcile_pending()`` + dispose.

Baseline: the same reconcile ``UPDATE`` through the stdlib ``sqlite3`` driver on a byte-identical
copy of the file (connect, the same pragmas, execute, commit, close). ``ratio`` = seconds /
baseline_seconds shows what SQLAlchemy, aiosqlite and Alembic add on top of the SQL itself.

    python bench/reconcile.py --quick     # one run (about 5 s)
    python bench/reconcile.py             # five runs, median

The last line of output is one JSON object (keys: rows, pending, seconds, baseline_seconds,
ratio, goal_seconds, meets_goal, ...).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import orjson

from drupe.persistence import RESTART_ERROR_PART, open_database
from drupe.persistence.reconcile import SQLITE_RECONCILE_SQL as RECONCILE_SQL

GOAL_SECONDS = 1.0
MESSAGES_PER_CONVERSATION = 100
_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=5000",
    "PRAGMA synchronous=NORMAL",
)


def _stamp(value: datetime) -> str:
    # SQLAlchemy's SQLite DATETIME storage format (naive UTC, microseconds).
    return value.astimezone(UTC).replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")


async def _create_schema(path: Path) -> None:
    async with open_database(f"sqlite+aiosqlite:///{path}"):
        pass


def _fill(path: Path, rows: int, pending: int) -> None:
    conversations = rows // MESSAGES_PER_CONVERSATION
    if pending > conversations:
        raise SystemExit(f"--pending must be <= {conversations} (one pending row per conversation)")
    base = datetime(2026, 1, 1, tzinfo=UTC)
    sentence = "The quick brown fox jumps over the lazy dog while the model keeps talking. "
    user_parts = orjson.dumps([{"type": "text", "text": sentence}]).decode()
    answer_parts = orjson.dumps(
        [{"type": "step-start"}, {"type": "text", "text": sentence * 4, "state": "done"}]
    ).decode()
    stats = orjson.dumps({"totalTokens": 120, "timeCompletionMs": 900}).decode()
    db = sqlite3.connect(path)
    try:
        for pragma in _PRAGMAS:
            db.execute(pragma)
        conversation_rows = []
        message_rows = []
        tick = 0
        for c in range(conversations):
            conversation_id = f"conv_{c:06d}"
            conversation_rows.append(
                (conversation_id, f"Conversation {c}", _stamp(base), _stamp(base), 0, "{}")
            )
            parent = None
            for m in range(MESSAGES_PER_CONVERSATION):
                tick += 1
                message_id = f"msg_{c:06d}_{m:03d}"
                is_user = m % 2 == 0
                is_last = m == MESSAGES_PER_CONVERSATION - 1
                status = "pending" if (is_last and c < pending) else "success"
                message_rows.append(
                    (
                        message_id,
                        conversation_id,
                        parent,
                        "user" if is_user else "assistant",
                        user_parts if is_user else ("[]" if status == "pending" else answer_parts),
                        status,
                        None if is_user else "openai:gpt-test",
                        None if is_user else m // 2,
                        None if is_user else stats,
                        None,
                        _stamp(base + timedelta(milliseconds=tick)),
                        _stamp(base + timedelta(milliseconds=tick)),
                    )
                )
                parent = message_id
        db.executemany(
            "INSERT INTO conversations (id, title, created_at, updated_at, siblings_group_seq,"
            " metadata) VALUES (?, ?, ?, ?, ?, ?)",
            conversation_rows,
        )
        db.executemany(
            "INSERT INTO messages (id, conversation_id, parent_id, role, parts, status, model_id,"
            " siblings_group_id, stats, metadata, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            message_rows,
        )
        db.commit()
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()


async def _timed_reconcile(path: Path) -> tuple[float, float, int]:
    start = time.perf_counter()
    async with open_database(f"sqlite+aiosqlite:///{path}") as database:
        opened = time.perf_counter()
        changed = await database.messages.reconcile_pending()
    return time.perf_counter() - start, opened - start, changed


def _baseline(path: Path) -> tuple[float, int]:
    part = orjson.dumps(RESTART_ERROR_PART).decode()
    start = time.perf_counter()
    db = sqlite3.connect(path)
    try:
        for pragma in _PRAGMAS:
            db.execute(pragma)
        cursor = db.execute(RECONCILE_SQL, {"now": _stamp(datetime.now(UTC)), "part": part})
        db.commit()
        changed = cursor.rowcount
    finally:
        db.close()
    return time.perf_counter() - start, changed


def _check(path: Path, pending: int) -> None:
    db = sqlite3.connect(path)
    try:
        (left,) = db.execute("SELECT count(*) FROM messages WHERE status = 'pending'").fetchone()
        (marked,) = db.execute(
            "SELECT count(*) FROM messages WHERE status = 'error' AND json_array_length(parts) = 1"
            " AND json_extract(parts, '$[0].type') = 'data-error'"
        ).fetchone()
    finally:
        db.close()
    if left != 0 or marked != pending:
        raise SystemExit(f"reconcile left {left} pending rows and marked {marked}/{pending}")


async def _one_run(workdir: Path, rows: int, pending: int) -> dict[str, float]:
    path = workdir / "drupe.db"
    copy = workdir / "baseline.db"
    build_start = time.perf_counter()
    await _create_schema(path)
    _fill(path, rows, pending)
    build_seconds = time.perf_counter() - build_start
    shutil.copyfile(path, copy)
    seconds, open_seconds, changed = await _timed_reconcile(path)
    baseline_seconds, baseline_changed = _baseline(copy)
    if changed != pending or baseline_changed != pending:
        raise SystemExit(f"expected {pending} reconciled rows, got {changed}/{baseline_changed}")
    _check(path, pending)
    _check(copy, pending)
    path.unlink()
    copy.unlink()
    return {
        "seconds": seconds,
        "open_seconds": open_seconds,
        "baseline_seconds": baseline_seconds,
        "build_seconds": build_seconds,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run instead of five")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--pending", type=int, default=1_000)
    args = parser.parse_args()
    runs = 1 if args.quick else 5
    results = []
    with tempfile.TemporaryDirectory(prefix="drupe-bench-reconcile-") as tmp:
        for n in range(runs):
            result = await _one_run(Path(tmp), args.rows, args.pending)
            results.append(result)
            print(f"run {n + 1}/{runs}: " + ", ".join(f"{k}={v:.4f}" for k, v in result.items()))

    def median(key: str) -> float:
        return statistics.median(r[key] for r in results)

    seconds = median("seconds")
    baseline = median("baseline_seconds")
    summary = {
        "bench": "reconcile",
        "rows": args.rows,
        "pending": args.pending,
        "runs": runs,
        "seconds": round(seconds, 4),
        "open_seconds": round(median("open_seconds"), 4),
        "reconcile_seconds": round(seconds - median("open_seconds"), 4),
        "baseline_seconds": round(baseline, 4),
        "baseline": "stdlib sqlite3: connect + same pragmas + the same UPDATE + commit",
        "ratio": round(seconds / baseline, 2),
        "goal_seconds": GOAL_SECONDS,
        "meets_goal": seconds < GOAL_SECONDS,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    anyio.run(main)
