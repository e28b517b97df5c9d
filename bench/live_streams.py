"""Benchmark P3: 10,000 concurrent live conversations in one process; RSS per live stream.

Starts ``--streams`` conversations on one real ``StreamManager``, each with one ``Subscriber``
(``bench/_common.py``: a bounded memory stream and its own consumer task, as an SSE connection)
and a chunk source that trickles one token-sized text delta every ``--interval`` seconds
(100 ms) after ``start`` / ``start-step`` / ``text-start``. Start times are staggered across
one interval (deterministically), as real conversations are.

Memory: ``VmRSS`` (after ``gc.collect()``) just before the streams start, and again once the
streams have published ``--chunks`` chunks each on average (15 by default, so each message holds
~12 deltas in its accumulator and ring); ``rss_per_stream_kib`` = difference / streams (goal P3:
<= 20 KiB). Throughput: chunks published per second over the measuring window, against the
expected ``streams / interval``: a ratio under 1 means the two cores do not keep up and every
stream trickles slower than asked.

Baseline (``--variant both``, the default): the same sources, subscribers and consumers with a
bare pump task per stream instead of the manager (source -> ``on_chunk``, nothing else), run
first in a child process so its heap never shares pages with this one. ``manager_kib_per_stream``
= ``rss_per_stream_kib`` - ``baseline_rss_per_stream_kib`` is what the manager itself costs
per live stream (execution task, cancel scopes, events, status, ring, accumulator).

Checkpoint cost (issue 8 point 10; ``--variant both`` runs it too): after the manager run, the
same streams again in this process (``--checkpoint-streams``, default 1,000, quick 500), with a
real SQLite database in a temporary directory, one ``pending`` placeholder row per stream and
the real persistence listener on every stream: ``persist`` with checkpoints off, ``checkpoint``
with them on (default ``CheckpointPolicy``: every live answer saved at least once a second),
alternating, ``--checkpoint-repeat`` times each (default 3, quick 2). ``checkpoint_cost_ratio``
= the median chunks per CPU second with checkpoints / without (goal: >= 0.95, i.e. checkpoints
cost at most 5 %); the CPU time is the whole process's, so the SQLite writer thread counts.
``--checkpoint-chunks`` (30) sets how far those runs go: the window then holds two to three
checkpoints per stream.

    python bench/live_streams.py --quick   # 2,000 streams
    python bench/live_streams.py           # 10,000 streams
    python bench/live_streams.py --http    # 10,000 streams over real HTTP (SSE), see below

``ratio_vs_bare`` = ``chunks_per_cpu_s`` / ``baseline_chunks_per_cpu_s`` (issue 11 §2: >= 0.9).
``--server-gc`` runs both in-process sides under the collector thresholds ``drupe serve`` sets
(``gc.set_threshold(20_000, 50, 100)``; ``--http`` always does); without it, Python's defaults,
under which the cyclic collector's passes over the manager's larger heap are most of the gap.

``--http`` (``bench/_live_http.py``): the same trickling streams through real sockets: the real
app on uvicorn on loopback, one SSE connection per stream from a client process, against the
bare pipe (task -> memory stream -> writer task -> socket) on a raw TCP server with the same
clients; each server runs alone in a child process, the bare one first, and reports its own
RSS and CPU. Keys: ``rss_per_stream_kib`` (goal <= 16 KiB of server RSS per stream),
``chunks_per_cpu_s``, ``ratio_vs_bare``, ``keeps_up_ratio``, and ``baseline_*`` for the bare
server. ``RLIMIT_NOFILE`` is raised to the hard limit in every process.

The streams are then stopped through ``StreamManager.shutdown`` (every one ends ``paused``).
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from _common import Subscriber, consume, median, parse_args, rss_kib, run, token_deltas
from _live_full import full, full_client_main, full_serve_main
from _live_http import client_main, serve
from drupe.persistence.backends import PlaceholderBackend
from drupe.persistence.db import Database, open_database
from drupe.persistence.records import NewMessage, NewPlaceholder
from drupe.streaming.checkpoints import Checkpointer, CheckpointPolicy
from drupe.streaming.listeners.base import Listener, StreamEvent
from drupe.streaming.listeners.persistence import PersistenceListener
from drupe.streaming.manager import ExecutionSpec, SendInput, StreamManager

GOAL_KIB = 20.0
HTTP_GOAL_KIB = 16.0
RATIO_GOAL = 0.9
SERVER_GC_THRESHOLD = (20_000, 50, 100)
"""What ``drupe serve`` sets (``cli/server.py``); ``--http`` always runs under it."""
CHECKPOINT_GOAL = 0.95
HTTP_VARIANTS = ("http", "http-bare", "http-asgi")
"""The ``--http`` servers (each in a child process of its own)."""
PERSISTED = ("persist", "checkpoint")
"""Variants with a database and a persistence listener per stream (checkpoints off / on)."""
_MAX_DELTAS = 100_000
"""Deltas a source would send if never stopped (the bench stops them long before)."""


def _source(index: int, interval: float, stagger: int) -> AsyncIterator[dict[str, Any]]:
    async def generate() -> AsyncIterator[dict[str, Any]]:
        await anyio.sleep(interval * (index % stagger) / stagger)
        yield {"type": "start", "messageId": f"msg_{index}"}
        yield {"type": "start-step"}
        yield {"type": "text-start", "id": "t1"}
        for n in range(_MAX_DELTAS):
            await anyio.sleep(interval)
            yield {"type": "text-delta", "id": "t1", "delta": token_deltas(1, offset=n + index)[0]}

    return generate()


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--streams", type=int, default=None, help="default 10,000 (quick 2,000)")
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between deltas")
    parser.add_argument("--chunks", type=int, default=15, help="chunks per stream before RSS")
    parser.add_argument("--timeout", type=float, default=120.0, help="give up after (seconds)")
    parser.add_argument(
        "--checkpoint-chunks", type=int, default=30, help="chunks per stream, checkpoint runs"
    )
    parser.add_argument(
        "--checkpoint-streams", type=int, default=None, help="default 1,000 (quick 500)"
    )
    parser.add_argument(
        "--checkpoint-repeat", type=int, default=None, help="runs of each, default 3 (quick 2)"
    )
    parser.add_argument(
        "--http", action="store_true", help="through real sockets: uvicorn + SSE vs a raw server"
    )
    parser.add_argument(
        "--server-gc",
        action="store_true",
        help="in process: both sides under the server's gc.set_threshold (drupe serve's), as"
        " --http always runs",
    )
    parser.add_argument(
        "--server",
        choices=("uvicorn", "granian", "both"),
        default="uvicorn",
        help="--http: the ASGI server under the app (both: side by side, interleaved)",
    )
    parser.add_argument("--client", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--full",
        action="store_true",
        help="the full path: POST /api/chat on a real drupe serve (bench/_live_full.py)",
    )
    parser.add_argument(
        "--full-rate", type=float, default=2.0, help="--full: deltas per second of an answer"
    )
    parser.add_argument(
        "--ttft-streams", type=int, default=100, help="--full: submits started together (TTFT)"
    )
    parser.add_argument("--full-repeat", type=int, default=1, help="--full: runs of each side")
    parser.add_argument(
        "--profile", action="store_true", help="--full: tracemalloc of the server (25 frames)"
    )
    parser.add_argument(
        "--diagnose",
        action="store_true",
        help="--full: the server's heap at the idle and live marks (pymalloc, gc types, smaps)",
    )
    parser.add_argument(
        "--baseline-src", default=None, help="--full: another checkout's src, run alternating"
    )
    parser.add_argument(
        "--variant",
        choices=("both", "manager", "baseline", *PERSISTED, *HTTP_VARIANTS),
        default="both",
        help="both: the baseline in a child process first, then the manager in this one, then"
        " the checkpoint cost (persist, checkpoint) in child processes",
    )


class _Counter:
    """Chunks published so far: the manager's own count, or the bare pumps' one."""

    def __init__(self, manager: StreamManager | None) -> None:
        self.manager = manager
        self.bare = 0

    @property
    def total(self) -> int:
        return self.manager.chunks_total if self.manager is not None else self.bare


async def _bare_pump(
    source: AsyncIterator[dict[str, Any]], sub: Subscriber, counter: _Counter
) -> None:
    """The baseline's stream: the source straight into the subscriber, nothing in between."""
    async for chunk in source:
        counter.bare += 1
        sub.on_chunk(
            StreamEvent(
                conversation_id="bare",
                turn_id="turn",
                execution_id="bench",
                attempt_id=1,
                anchor_message_id=None,
                seq=counter.bare,
                chunk=chunk,
            )
        )


async def _wait_chunks(counter: _Counter, target: int, deadline: float) -> bool:
    while counter.total < target:
        if time.monotonic() > deadline:
            return False
        await anyio.sleep(0.05)
    return True


async def _placeholders(db: Database, streams: int) -> list[str]:
    """One conversation per stream, each with a user row and a ``pending`` placeholder."""
    rows = []
    for index in range(streams):
        conversation = await db.conversations.create(conversation_id=f"live-{index}")
        row = f"msg_answer_{index}"
        await db.messages.create_turn(
            conversation.id,
            user_message=NewMessage(id=f"msg_user_{index}", parts=[{"type": "text", "text": "q"}]),
            parent_id=None,
            placeholders=[NewPlaceholder(message_id=row, model_id="bench")],
        )
        rows.append(row)
    return rows


async def _measure(args: argparse.Namespace, streams: int, variant: str) -> dict[str, Any]:
    interval: float = args.interval
    stagger = 100
    chunks_target = args.checkpoint_chunks if variant in PERSISTED else args.chunks
    async with AsyncExitStack() as stack:
        rows: list[str] = []
        checkpointer: Checkpointer | None = None
        if variant in PERSISTED:
            directory = stack.enter_context(tempfile.TemporaryDirectory())
            url = f"sqlite+aiosqlite:///{Path(directory) / 'bench.db'}"
            db = await stack.enter_async_context(open_database(url))
            rows = await _placeholders(db, streams)
            if variant == "checkpoint":
                checkpointer = await stack.enter_async_context(Checkpointer(CheckpointPolicy()))
        manager = await stack.enter_async_context(StreamManager())
        tasks = await stack.enter_async_context(anyio.create_task_group())
        counter = _Counter(manager if variant != "baseline" else None)
        subs = [Subscriber(f"sub-{i}") for i in range(streams)]
        rss_before = rss_kib()
        started = time.perf_counter()
        for index, sub in enumerate(subs):
            tasks.start_soon(consume, sub)
            if variant == "baseline":
                tasks.start_soon(_bare_pump, _source(index, interval, stagger), sub, counter)
                continue
            listeners: list[Listener] = [sub]
            anchor = None
            if rows:
                anchor = rows[index]
                listeners.append(
                    PersistenceListener(
                        PlaceholderBackend(db.messages, anchor),
                        model_id="bench",
                        conversation_id=f"live-{index}",
                        checkpointer=checkpointer,
                    )
                )
            manager.send(
                SendInput(
                    conversation_id=f"live-{index}",
                    executions=[
                        ExecutionSpec(
                            model_id="bench",
                            source=lambda i=index: _source(i, interval, stagger),  # type: ignore[misc]
                            anchor_message_id=anchor,
                        )
                    ],
                    listeners=listeners,
                )
            )
        start_seconds = time.perf_counter() - started
        deadline = time.monotonic() + args.timeout
        # Window for throughput: from 5 chunks per stream on average to the target.
        warm = await _wait_chunks(counter, streams * min(5, args.chunks), deadline)
        window_start = (time.perf_counter(), time.process_time(), counter.total)
        reached = warm and await _wait_chunks(counter, streams * chunks_target, deadline)
        window_end = (time.perf_counter(), time.process_time(), counter.total)
        rss_live = rss_kib()
        live = manager.statistics()["live_streams"] if variant != "baseline" else streams
        chunks_at_rss = counter.total
        checkpoint_rows = checkpointer.rows_written if checkpointer is not None else 0
        stop_started = time.perf_counter()
        if variant != "baseline":
            await manager.shutdown()
        else:
            tasks.cancel_scope.cancel()
        stop_seconds = time.perf_counter() - stop_started
    wall = window_end[0] - window_start[0]
    cpu = window_end[1] - window_start[1]
    published = window_end[2] - window_start[2]
    chunks_per_s = published / wall if wall > 0 else 0.0
    expected = streams / interval
    per_stream = (rss_live - rss_before) / streams
    print(
        f"{variant}: {live} live streams (started in {start_seconds:.2f} s);"
        f" RSS {rss_before / 1024:.1f} MiB before, {rss_live / 1024:.1f} MiB live"
        f" ({chunks_at_rss / streams:.1f} chunks each): {per_stream:.2f} KiB per live stream"
    )
    print(
        f"{variant}: {chunks_per_s:,.0f} chunks/s of {expected:,.0f} expected"
        f" ({chunks_per_s / expected:.2f}); CPU {cpu / wall if wall else 0:.0%} of one core,"
        f" {published / cpu if cpu > 0 else 0:,.0f} chunks per CPU second;"
        f" stop took {stop_seconds:.2f} s"
    )
    if checkpointer is not None:
        print(f"{variant}: {checkpoint_rows:,} checkpoint rows written in the window and before")
    if not reached:
        print(f"WARNING: the streams did not reach {chunks_target} chunks each in {args.timeout} s")
    return {
        "bench": "live_streams",
        "variant": variant,
        "live_streams": live,
        "streams": streams,
        "interval_ms": interval * 1000,
        "chunks_per_stream_at_rss": round(chunks_at_rss / streams, 1),
        "rss_before_kib": rss_before,
        "rss_live_kib": rss_live,
        "rss_per_stream_kib": round(per_stream, 2),
        "chunks_per_s": round(chunks_per_s),
        "expected_chunks_per_s": round(expected),
        "keeps_up_ratio": round(chunks_per_s / expected, 3),
        "cpu_share_of_one_core": round(cpu / wall, 3) if wall else None,
        "chunks_per_cpu_s": round(published / cpu) if cpu > 0 else None,
        "start_seconds": round(start_seconds, 3),
        "stop_seconds": round(stop_seconds, 3),
        "events_received": sum(sub.events for sub in subs),
        "overflowed_subscribers": sum(1 for sub in subs if sub.overflowed),
        "reached_target": reached,
        "checkpoint_rows": checkpoint_rows,
    }


def _variant_in_child(
    args: argparse.Namespace, streams: int, variant: str, server: str = "uvicorn"
) -> dict[str, Any]:
    """Run a variant in a fresh process: RSS deltas do not survive a previous run's heap."""
    command = [
        sys.executable,
        __file__,
        *(["--quick"] if args.quick else []),
        *(["--server-gc"] if args.server_gc else []),
        "--variant",
        variant,
        "--server",
        server,
        "--loop",
        args.loop,
        "--streams",
        str(streams),
        "--interval",
        str(args.interval),
        "--chunks",
        str(args.chunks),
        "--checkpoint-chunks",
        str(args.checkpoint_chunks),
        "--checkpoint-streams",
        str(args.checkpoint_streams or 0),
        "--checkpoint-repeat",
        str(args.checkpoint_repeat or 0),
        "--timeout",
        str(args.timeout),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    lines = done.stdout.strip().splitlines()
    for line in lines[1:-1]:  # the child's own header line is this process's
        print(line)
    summary: dict[str, Any] = json.loads(lines[-1])
    return summary


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    if args.full:
        return full(args)
    streams = args.streams or (2_000 if args.quick else 10_000)
    print(
        f"live streams: {streams} conversations, one delta every {args.interval * 1000:.0f} ms"
        " each, one subscriber each"
    )
    if args.server_gc and not args.http and args.variant not in HTTP_VARIANTS:
        gc.set_threshold(*SERVER_GC_THRESHOLD)
    if args.variant in ("baseline", *PERSISTED):
        return await _measure(args, streams, args.variant)
    if args.variant in HTTP_VARIANTS:
        return await serve(args, streams, args.variant)
    if args.http:
        return _http(args, streams)
    # The baseline runs first, alone, so the two never compete for the cores.
    baseline = _variant_in_child(args, streams, "baseline") if args.variant == "both" else None
    summary = await _measure(args, streams, "manager")
    per_stream = summary["rss_per_stream_kib"]
    summary["goal_kib"] = GOAL_KIB
    summary["meets_goal"] = per_stream <= GOAL_KIB and summary["live_streams"] == streams
    if baseline is not None:
        summary["baseline_rss_per_stream_kib"] = baseline["rss_per_stream_kib"]
        summary["manager_kib_per_stream"] = round(per_stream - baseline["rss_per_stream_kib"], 2)
        summary["baseline_chunks_per_cpu_s"] = baseline["chunks_per_cpu_s"]
        summary["baseline_chunks_per_s"] = baseline["chunks_per_s"]
        summary["ratio_vs_bare"] = _ratio(summary["chunks_per_cpu_s"], baseline["chunks_per_cpu_s"])
        summary["ratio_goal"] = RATIO_GOAL
        summary["server_gc"] = args.server_gc
        print(
            f"the manager adds {summary['manager_kib_per_stream']:.2f} KiB per live stream over"
            f" the bare source -> subscriber pipe ({baseline['rss_per_stream_kib']:.2f} KiB)"
        )
        summary.update(await _checkpoint_cost(args))
    return summary


def _ratio(value: float | None, baseline: float | None) -> float | None:
    return round(value / baseline, 3) if value and baseline else None


def _http(args: argparse.Namespace, streams: int) -> dict[str, Any]:
    """The bare server, then Drupe's, each in a child process with its own client process."""
    bare = _variant_in_child(args, streams, "http-bare")
    servers = ("uvicorn", "granian") if args.server == "both" else (args.server,)
    per_server = {}
    for server in servers:  # interleaved: each server's floor, then Drupe on it
        floor = _variant_in_child(args, streams, "http-asgi", server)
        on_server = _variant_in_child(args, streams, "http", server)
        per_server[server] = {
            "rss_per_stream_kib": on_server["rss_per_stream_kib"],
            "chunks_per_cpu_s": on_server["chunks_per_cpu_s"],
            "keeps_up_ratio": on_server["keeps_up_ratio"],
            "live_streams": on_server["live_streams"],
            "asgi_bare_rss_per_stream_kib": floor["rss_per_stream_kib"],
            "asgi_bare_chunks_per_cpu_s": floor["chunks_per_cpu_s"],
            "asgi_bare_keeps_up_ratio": floor["keeps_up_ratio"],
        }
        print(
            f"{server}: Drupe {on_server['rss_per_stream_kib']:.2f} KiB/stream,"
            f" {on_server['chunks_per_cpu_s']} chunks/CPU s; bare ASGI"
            f" {floor['rss_per_stream_kib']:.2f} KiB/stream, {floor['chunks_per_cpu_s']}"
        )
        if server == servers[0]:
            drupe = on_server
    ratio = _ratio(drupe["chunks_per_cpu_s"], bare["chunks_per_cpu_s"])
    per_stream = drupe["rss_per_stream_kib"]
    print(
        f"over HTTP: {per_stream:.2f} KiB of server RSS per stream (bare"
        f" {bare['rss_per_stream_kib']:.2f}); chunks per CPU second {ratio}x the bare server's"
    )
    return {
        "bench": "live_streams",
        "variant": "http",
        "server": servers[0],
        "servers": per_server,
        "streams": streams,
        "live_streams": drupe["live_streams"],
        "interval_ms": args.interval * 1000,
        "rss_per_stream_kib": per_stream,
        "chunks_per_cpu_s": drupe["chunks_per_cpu_s"],
        "ratio_vs_bare": ratio,
        "keeps_up_ratio": drupe["keeps_up_ratio"],
        "chunks_per_s": drupe["chunks_per_s"],
        "expected_chunks_per_s": drupe["expected_chunks_per_s"],
        "cpu_share_of_one_core": drupe["cpu_share_of_one_core"],
        "frames_received": drupe["frames_received"],
        "chunks_published": drupe["chunks_published"],
        "reached_target": drupe["reached_target"],
        "baseline_rss_per_stream_kib": bare["rss_per_stream_kib"],
        "baseline_chunks_per_cpu_s": bare["chunks_per_cpu_s"],
        "baseline_keeps_up_ratio": bare["keeps_up_ratio"],
        "baseline_chunks_per_s": bare["chunks_per_s"],
        "goal_kib": HTTP_GOAL_KIB,
        "ratio_goal": RATIO_GOAL,
        "meets_goal": per_stream <= HTTP_GOAL_KIB
        and (ratio or 0) >= RATIO_GOAL
        and drupe["live_streams"] == streams,
    }


async def _checkpoint_cost(args: argparse.Namespace) -> dict[str, Any]:
    """Checkpoints off and on, alternating, in this process (after the manager run); the ratio
    of the medians of chunks per CPU second."""
    streams = args.checkpoint_streams or (500 if args.quick else 1_000)
    repeat = args.checkpoint_repeat or (2 if args.quick else 3)
    print(f"checkpoint cost: {streams} streams, {repeat} runs with and without, alternating")
    off: list[dict[str, Any]] = []
    on: list[dict[str, Any]] = []
    for _ in range(repeat):
        off.append(await _measure(args, streams, "persist"))
        on.append(await _measure(args, streams, "checkpoint"))
    off_cpu = median([run["chunks_per_cpu_s"] or 0 for run in off])
    on_cpu = median([run["chunks_per_cpu_s"] or 0 for run in on])
    ratio = on_cpu / off_cpu if on_cpu and off_cpu else 0.0
    rows = round(median([run["checkpoint_rows"] for run in on]))
    print(
        f"checkpoints: {on_cpu:,.0f} chunks per CPU second with them, {off_cpu:,.0f} without"
        f" (medians): ratio {ratio:.3f} (goal >= {CHECKPOINT_GOAL}); {rows:,} checkpoint rows"
        " per run"
    )
    return {
        "checkpoint_cost_ratio": round(ratio, 3),
        "checkpoint_goal": CHECKPOINT_GOAL,
        "checkpoint_meets_goal": ratio >= CHECKPOINT_GOAL,
        "checkpoint_streams": streams,
        "checkpoint_rows": rows,
        "persist_chunks_per_cpu_s": round(off_cpu),
        "checkpoint_chunks_per_cpu_s": round(on_cpu),
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["--full-serve"]:
        full_serve_main(sys.argv[2:])
        sys.exit(0)
    if sys.argv[1:2] == ["--full-client"]:
        full_client_main(sys.argv[2])
        sys.exit(0)
    arguments = parse_args(__doc__.splitlines()[0], _arguments)
    if arguments.client is not None:
        anyio.run(
            client_main,
            arguments.client,
            arguments.streams,
            backend_options={"use_uvloop": arguments.loop == "uvloop"},
        )
    else:
        run(lambda: _main(arguments), arguments)
