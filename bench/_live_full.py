"""``live_streams.py --full``: the full path of a live answer on ``drupe serve`` (issue 24 §0).

Everything runs as real processes, as a user runs them:

* the server: ``drupe serve --port 0`` with its default database (SQLite in a fresh data dir)
  and a config whose default model is the scripted one, started through this module
  (``--serve``) so that ``SIGUSR1`` can take tracemalloc snapshots in it (``--profile``);
* the clients: one process (``--client``) with raw asyncio protocols; each opens ONE connection,
  sends ``POST /api/chat`` (a new conversation, one user message, the model
  ``scripted:lorem?words=W&rate=R``) and counts the SSE frames of its answer. Every
  connection is opened at the same moment ("started together").

Two phases on the same server, after one warm-up turn (the first turn imports the agent loop
and the provider SDKs: about 30 MB, once per process, not per answer):

1. **time to first token** of ``--ttft-streams`` (100) submits started together, each a short
   answer (3 words): p50/p99 from the common start to the first ``text-delta`` frame
   (``full_ttft_together_p50_s`` / ``_p99_s``; goal p50 <= 0.5 s); the server goes idle again.
2. **memory**: ``--streams`` (1,000; quick 200) submits started together, each a long answer
   paced at ``--full-rate`` deltas per second (2), kept live. ``full_rss_per_stream_kib`` =
   (VmRSS of the server once every answer has streamed ``--chunks`` deltas on average - VmRSS
   after the warm-up and phase 1) / streams (goal <= 64 KiB). The same submits give
   ``full_ttft_p50_s`` / ``_p99_s`` and ``full_admissions_per_s`` (streams / the time from the
   common start to the last response's status line: the admission of every turn).

``--profile`` traces the server with ``tracemalloc`` (25 frames) from the idle mark (before
phase 2) on, and writes, next to the figures, where the live answers' memory goes: the difference
between a snapshot at the idle mark and one once the answers are live, grouped by the allocating
line, by the innermost frame in ``src/drupe`` and by package (the ``drupe.*`` module, or the
site-package / standard library module that allocated) (``full_profile``; the server is much
slower while tracing, so a profiled run wants a low ``--full-rate`` (0.5) and few ``--chunks``
(5) to keep every answer live until all are admitted; its RSS figure is not comparable).

``--diagnose`` asks the server (``SIGUSR2``) at the idle mark and again right after the live RSS
is read for what its heap holds, and reports the difference per live answer
(``full_diagnosis``): pymalloc's blocks in use and arenas mapped (``sys._debugmallocstats``),
the C heap and anonymous mappings (``/proc/self/smaps``), the gc-tracked objects and the types
that grew most. It separates the live Python heap from the allocator's slack, which is how the
1,000-answer rise was explained (bench/README.md, "Issue 24 §0 and §3").

``--baseline-src DIR`` runs the same phases once more with the server's ``PYTHONPATH`` set to
``DIR`` (another checkout's ``src``), alternating, and reports ``baseline_full_*`` and the ratio.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from statistics import median
from typing import Any

import anyio
import anyio.to_thread

__all__ = ["full", "full_client_main", "full_serve_main"]

GOAL_KIB = 64.0
GOAL_TTFT_S = 0.5
CONFIG = 'default_model = "scripted:echo"\n'
_PROFILE_ENV = "DRUPE_BENCH_TRACEMALLOC"
_DIAGNOSE_ENV = "DRUPE_BENCH_DIAGNOSE"
_HERE = Path(__file__).resolve()
_ROOT = _HERE.parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))  # tests.multinode.harness


def _raise_open_files() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# --- the server (a child process) -----------------------------------------------------------


def _drupe_frame(trace: tracemalloc.Traceback) -> str:
    """The innermost frame of ``trace`` inside Drupe's own code (or ``<outside drupe>``)."""
    for frame in reversed(trace):  # a Traceback lists the oldest call first
        name = frame.filename.replace("\\", "/")
        if "/drupe/" in name and "/bench/" not in name:
            return f"{name.rsplit('/drupe/', 1)[1]}:{frame.lineno}"
    return "<outside drupe>"


def _package(filename: str) -> str:
    """The package of an allocating file: the ``drupe.*`` module, a site-package's top name, or the
    standard library module (``asyncio``, ``contextlib``, ...)."""
    name = filename.replace("\\", "/")
    if "/drupe/" in name and "/bench/" not in name:
        rest = name.rsplit("/drupe/", 1)[1].removesuffix(".py").split("/")
        return "drupe." + ".".join(rest)
    if "site-packages/" in name:
        top = name.rsplit("site-packages/", 1)[1].split("/", 1)[0]
        return top.removesuffix(".py").split(".", 1)[0]
    if name.startswith("<"):
        return name
    parts = name.rsplit("/python3", 1)[-1].split("/")
    return parts[1].removesuffix(".py") if len(parts) > 1 else name


def _write_profile(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, path: str) -> None:
    keep = [tracemalloc.Filter(False, tracemalloc.__file__)]
    before, after = before.filter_traces(keep), after.filter_traces(keep)
    by_line = [
        {"where": f"{s.traceback[0].filename}:{s.traceback[0].lineno}", "bytes": s.size_diff}
        for s in after.compare_to(before, "lineno")[:40]
    ]
    drupe: dict[str, int] = {}
    for stat in after.compare_to(before, "traceback"):
        where = _drupe_frame(stat.traceback)
        drupe[where] = drupe.get(where, 0) + stat.size_diff
    by_drupe = sorted(drupe.items(), key=lambda kv: -kv[1])[:40]
    package: dict[str, int] = {}
    for stat in after.compare_to(before, "filename"):
        where = _package(stat.traceback[0].filename)
        package[where] = package.get(where, 0) + stat.size_diff
    by_package = sorted(package.items(), key=lambda kv: -kv[1])[:30]
    total = sum(s.size_diff for s in after.compare_to(before, "filename"))
    Path(path).write_text(
        json.dumps(
            {
                "traced_bytes": total,
                "by_line": by_line,
                "by_drupe_frame": [{"where": w, "bytes": b} for w, b in by_drupe],
                "by_package": [{"where": w, "bytes": b} for w, b in by_package],
            }
        )
    )


def _heap_state() -> dict[str, Any]:
    """What this process's heap holds now (run in the server, on ``SIGUSR2``)."""
    import gc
    from collections import Counter

    with tempfile.TemporaryFile("w+") as out:  # _debugmallocstats writes to the C stderr
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        stats = out.read()

    def stat(label: str) -> int:
        for line in stats.splitlines():
            if line.startswith(label):
                return int(line.rsplit("=", 1)[1].strip().replace(",", ""))
        return 0

    maps: dict[str, int] = {"heap": 0, "anon": 0}
    region = "anon"
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and not head[0].endswith(":"):
            region = "heap" if head[-1] == "[heap]" else "anon" if len(head) < 6 else "file"
        elif head and head[0] == "Rss:" and region in maps:
            maps[region] += int(head[1])
    objects = gc.get_objects()
    types = Counter(type(o).__name__ for o in objects)
    return {
        "pymalloc_blocks": stat("# bytes in allocated blocks"),
        "pymalloc_arenas": stat("# arenas allocated current") * 1024 * 1024,
        "heap_kib": maps["heap"],
        "anon_kib": maps["anon"],
        "gc_objects": len(objects),
        "types": dict(types),
    }


def _per_answer(idle: dict[str, Any], live: dict[str, Any], streams: int) -> dict[str, Any]:
    grew = {t: (live["types"].get(t, 0) - n) for t, n in idle["types"].items()}
    grew.update({t: n for t, n in live["types"].items() if t not in idle["types"]})
    top = sorted(grew.items(), key=lambda kv: -kv[1])[:25]
    return {
        "pymalloc_blocks_kib": round(
            (live["pymalloc_blocks"] - idle["pymalloc_blocks"]) / 1024 / streams, 2
        ),
        "pymalloc_arenas_kib": round(
            (live["pymalloc_arenas"] - idle["pymalloc_arenas"]) / 1024 / streams, 2
        ),
        "c_heap_kib": round((live["heap_kib"] - idle["heap_kib"]) / streams, 2),
        "anon_kib": round((live["anon_kib"] - idle["anon_kib"]) / streams, 2),
        "gc_objects": round((live["gc_objects"] - idle["gc_objects"]) / streams, 1),
        "types": [{"type": t, "per_answer": round(n / streams, 2)} for t, n in top],
    }


def full_serve_main(argv: list[str]) -> None:
    """``drupe <argv>`` in this process; with ``$DRUPE_BENCH_TRACEMALLOC`` set, each ``SIGUSR1``
    takes a tracemalloc snapshot (the first one starts tracing; the second writes the profile).
    Tracing from the idle mark on keeps boot and warm-up at full speed (25 frames from the start
    made boot miss the 60 s announce deadline on a loaded machine)."""
    _raise_open_files()
    out = os.environ.get(_PROFILE_ENV)
    if out:
        snapshots: list[tracemalloc.Snapshot] = []

        def on_signal(_signum: int, _frame: Any) -> None:
            if not snapshots:  # tracing starts at the idle mark: boot and warm-up run untraced
                tracemalloc.start(25)
            snapshots.append(tracemalloc.take_snapshot())
            if len(snapshots) == 2:
                _write_profile(snapshots[0], snapshots[1], out)
            Path(f"{out}.{len(snapshots)}").write_text("ok")

        signal.signal(signal.SIGUSR1, on_signal)
    diagnose = os.environ.get(_DIAGNOSE_ENV)
    if diagnose:
        taken: list[int] = []

        def on_diagnose(_signum: int, _frame: Any) -> None:
            taken.append(1)
            Path(f"{diagnose}.{len(taken)}").write_text(json.dumps(_heap_state()))

        signal.signal(signal.SIGUSR2, on_diagnose)
    from drupe.cli.main import main

    sys.argv = ["drupe", *argv]
    main()


# --- the clients (a child process) ----------------------------------------------------------


class _Submit(asyncio.Protocol):
    """One ``POST /api/chat``: the status line's time, the first text delta's, the frames."""

    def __init__(self, request: bytes, tally: _Tally) -> None:
        self.request = request
        self.tally = tally
        self.status = 0
        self.head = b""
        self.headers_at: float | None = None
        self.first_text_at: float | None = None
        self.frames = 0
        self.tail = b""
        self.done = False
        self.transport: asyncio.Transport | None = None
        self.counted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        if not self.status:
            self.head += data
            if b"\r\n\r\n" not in self.head:
                return
            head, _, data = self.head.partition(b"\r\n\r\n")
            self.status = int(head.split(b" ", 2)[1])
            self.headers_at = time.perf_counter()
            self.head = b""
            if self.status != 200:
                self._end()
                return
        window = self.tail + data
        self.frames += window.count(b"\n\n") - self.tail.count(b"\n\n")
        if self.first_text_at is None and b'"text-delta"' in window:
            self.first_text_at = time.perf_counter()
        if self.first_text_at is not None:
            self._count()
        if b"data: [DONE]" in window:
            self._end()
        self.tail = window[-16:]

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()

    def _count(self) -> None:
        if not self.counted:
            self.counted = True
            self.tally.step(self.tally.started_or_ended, self.tally.all_started)

    def _end(self) -> None:
        self._count()
        if not self.done:
            self.done = True
            self.tally.step(self.tally.ended, self.tally.all_ended)


class _Tally:
    """How many submits have their first text delta (or ended), and how many ended."""

    def __init__(self, streams: int) -> None:
        self.streams = streams
        self.started_or_ended = [0]
        self.ended = [0]
        self.all_started = anyio.Event()
        self.all_ended = anyio.Event()

    def step(self, count: list[int], event: anyio.Event) -> None:
        count[0] += 1
        if count[0] == self.streams:
            event.set()


def _request(conversation: str, model: str) -> bytes:
    body = json.dumps(
        {
            "id": conversation,
            "trigger": "submit-message",
            "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}],
            "models": [model],
        }
    ).encode()
    return (
        b"POST /api/chat HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(body), body)
    )


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _client(spec: dict[str, Any]) -> None:
    """Open ``streams`` submits together; print ``ready`` once each has its first text delta
    (or ended), wait for a line on stdin (keep them open meanwhile), then one JSON line."""
    _raise_open_files()
    loop = asyncio.get_running_loop()
    streams, port = spec["streams"], spec["port"]
    tally = _Tally(streams)
    submits = [
        _Submit(_request(f"{spec['tag']}-{i}", spec["model"]), tally) for i in range(streams)
    ]

    async def connect(submit: _Submit) -> None:
        await loop.create_connection(lambda: submit, "127.0.0.1", port)

    started = time.perf_counter()
    with anyio.fail_after(spec["timeout"]):
        async with anyio.create_task_group() as tg:
            for submit in submits:
                tg.start_soon(connect, submit)
        await tally.all_started.wait()
    print("ready", flush=True)
    if spec.get("hold"):
        await anyio.to_thread.run_sync(sys.stdin.readline)
    else:
        with anyio.fail_after(spec["timeout"]):
            await tally.all_ended.wait()
    ttft = [s.first_text_at - started for s in submits if s.first_text_at is not None]
    heads = [s.headers_at - started for s in submits if s.headers_at is not None]
    for s in submits:
        if s.transport is not None:
            s.transport.close()
    print(
        json.dumps(
            {
                "ok": sum(1 for s in submits if s.status == 200 and s.first_text_at is not None),
                "statuses": sorted({s.status for s in submits}),
                "ttft_p50_s": median(ttft) if ttft else None,
                "ttft_p99_s": _percentile(ttft, 0.99) if ttft else None,
                "admitted_s": max(heads) if heads else None,
                "frames": sum(s.frames for s in submits),
            }
        ),
        flush=True,
    )


def full_client_main(spec_json: str) -> None:
    anyio.run(_client, json.loads(spec_json), backend_options={"use_uvloop": True})


# --- the orchestrator -----------------------------------------------------------------------


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def _live_count(port: int) -> int:
    import httpx

    status = httpx.get(f"http://127.0.0.1:{port}/api/status", timeout=60).json()
    return int(status["liveStreams"])


class _Server:
    def __init__(
        self, work: Path, src: str | None, profile: Path | None, diagnose: Path | None = None
    ) -> None:
        from tests.multinode.harness import await_announce

        data = work / "data"
        data.mkdir()
        (data / "config.toml").write_text(CONFIG)
        env = {k: v for k, v in os.environ.items() if not k.startswith("DRUPE_")}
        env["PYTHONUNBUFFERED"] = "1"
        if src is not None:
            env["PYTHONPATH"] = os.pathsep.join([src, str(_HERE.parent)])
        if profile is not None:
            env[_PROFILE_ENV] = str(profile)
        if diagnose is not None:
            env[_DIAGNOSE_ENV] = str(diagnose)
        self.profile = profile
        self.diagnosis = diagnose
        self.log = work / "serve.log"
        with self.log.open("a") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, str(_HERE.parent / "live_streams.py"), "--full-serve", "serve",
                 "--no-auth", "--port", "0", "--data-dir", str(data),
                 "--config", str(data / "config.toml")],
                stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, cwd=work,
            )  # fmt: skip
        url = await_announce(self.process, self.log, "drupe serve (full path)")
        self.port = int(url.rsplit(":", 1)[1].strip("/"))

    def snapshot(self, n: int) -> None:
        assert self.profile is not None
        self.process.send_signal(signal.SIGUSR1)
        marker = Path(f"{self.profile}.{n}")
        deadline = time.monotonic() + 600
        while not marker.exists():
            if time.monotonic() > deadline:
                raise SystemExit("the server wrote no tracemalloc snapshot")
            time.sleep(0.2)

    def diagnose(self, n: int) -> dict[str, Any]:
        assert self.diagnosis is not None
        self.process.send_signal(signal.SIGUSR2)
        answer = Path(f"{self.diagnosis}.{n}")
        deadline = time.monotonic() + 120
        while not answer.exists():
            if time.monotonic() > deadline:
                raise SystemExit("the server wrote no heap state")
            time.sleep(0.1)
        time.sleep(0.2)  # written in one call; let it land whole
        state: dict[str, Any] = json.loads(answer.read_text())
        return state

    def close(self) -> None:
        self.process.kill()  # the bench's answers are never resumed: no graceful shutdown
        self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def _clients(spec: dict[str, Any], on_ready: Any = None) -> dict[str, Any]:
    command = [sys.executable, str(_HERE.parent / "live_streams.py"), "--full-client"]
    with subprocess.Popen(
        [*command, json.dumps(spec)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None and proc.stdin is not None
        line = proc.stdout.readline().strip()
        if line != "ready":
            raise SystemExit(f"the full-path clients said {line!r} ({proc.wait()})")
        if on_ready is not None:
            on_ready()
        if spec.get("hold"):
            proc.stdin.write("\n")
            proc.stdin.flush()
        result: dict[str, Any] = json.loads(proc.stdout.readline())
    if result["ok"] != spec["streams"]:
        raise SystemExit(f"full path: submits failed: {result}")
    return result


def _one_run(args: Any, streams: int, src: str | None, tag: str) -> dict[str, Any]:
    profile_path = None
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.profile:
            profile_path = work / "profile.json"
        server = _Server(work, src, profile_path, work / "heap" if args.diagnose else None)
        heap: dict[str, dict[str, Any]] = {}
        try:
            timeout = max(120.0, streams * 0.2) * (4 if args.profile else 1)  # tracing: slower
            base = {"port": server.port, "timeout": timeout}
            _clients(base | {"streams": 1, "tag": "warm", "model": "scripted:lorem?words=3"})
            ttft = _clients(
                base
                | {
                    "streams": args.ttft_streams,
                    "tag": "ttft",
                    "model": "scripted:lorem?words=3&rate=10",
                }
            )
            time.sleep(1.0)  # the short answers end and their rows settle
            idle = _rss_kib(server.process.pid)
            if args.diagnose:
                heap["idle"] = server.diagnose(1)
            if args.profile:
                server.snapshot(1)
            rate = args.full_rate
            # Long enough to be live when measured, short enough that the scripted model's plan
            # (one small object per word, made when the request opens) stays a few KB.
            words = args.chunks * 2 + 40
            marks: dict[str, float] = {}

            def measure() -> None:
                # every answer has its first delta: let them stream ``--chunks`` more on average
                time.sleep(args.chunks / rate)
                marks["live"] = _rss_kib(server.process.pid)
                marks["streaming"] = _live_count(server.port)
                if args.diagnose:
                    heap["live"] = server.diagnose(2)
                if args.profile:
                    server.snapshot(2)

            live = _clients(
                base
                | {
                    "streams": streams,
                    "tag": "live",
                    "model": f"scripted:lorem?words={words}&rate={rate:g}",
                    "hold": True,
                },
                measure,
            )
        finally:
            server.close()
        profile = json.loads(profile_path.read_text()) if profile_path is not None else None
    if marks["streaming"] != streams:
        raise SystemExit(f"{marks['streaming']} answers were live when measured, not {streams}")
    per_stream = (marks["live"] - idle) / streams
    print(
        f"  {tag}: {per_stream:.1f} KiB per live answer ({streams} answers; idle "
        f"{idle / 1024:.0f} MiB, live {marks['live'] / 1024:.0f} MiB); TTFT of {streams} "
        f"together p50 {live['ttft_p50_s']:.2f} s p99 {live['ttft_p99_s']:.2f} s; "
        f"{args.ttft_streams} together p50 {ttft['ttft_p50_s']:.2f} s p99 "
        f"{ttft['ttft_p99_s']:.2f} s; {streams / live['admitted_s']:.0f} admissions/s",
        flush=True,
    )
    return {
        "full_rss_per_stream_kib": per_stream,
        "full_idle_rss_kib": idle,
        "full_live_rss_kib": marks["live"],
        "full_ttft_p50_s": live["ttft_p50_s"],
        "full_ttft_p99_s": live["ttft_p99_s"],
        "full_admissions_per_s": streams / live["admitted_s"],
        "full_ttft_together_p50_s": ttft["ttft_p50_s"],
        "full_ttft_together_p99_s": ttft["ttft_p99_s"],
        "full_frames_per_stream": live["frames"] / streams,
        "profile": profile,
        "diagnosis": _per_answer(heap["idle"], heap["live"], streams) if heap else None,
    }


_KEYS = (
    "full_rss_per_stream_kib",
    "full_ttft_p50_s",
    "full_ttft_p99_s",
    "full_admissions_per_s",
    "full_ttft_together_p50_s",
    "full_ttft_together_p99_s",
    "full_frames_per_stream",
)


def full(args: Any) -> dict[str, Any]:
    """The ``--full`` figures (see the module docstring)."""
    streams = args.streams or (200 if args.quick else 1_000)
    repeat = args.full_repeat
    print(
        f"full path: {streams} POST /api/chat answers at {args.full_rate:g} deltas/s on a real "
        f"drupe serve (SQLite, scripted model); {args.ttft_streams} short ones for the TTFT"
    )
    runs: dict[str, list[dict[str, Any]]] = {"this": [], "baseline": []}
    for i in range(repeat):
        sides = ["this", "baseline"] if args.baseline_src else ["this"]
        if i % 2:
            sides.reverse()
        for side in sides:
            src = args.baseline_src if side == "baseline" else None
            runs[side].append(_one_run(args, streams, src, f"{side} run {i + 1}"))
    out: dict[str, Any] = {
        "bench": "live_streams",
        "variant": "full",
        "live_streams": streams,
        "ttft_streams": args.ttft_streams,
        "full_rate": args.full_rate,
        "repeat": repeat,
    }
    for key in _KEYS:
        values = [r[key] for r in runs["this"]]
        out[key] = round(median(values), 3)
        out[f"runs_{key}"] = [round(v, 3) for v in values]
        if runs["baseline"]:
            base = [r[key] for r in runs["baseline"]]
            out[f"baseline_{key}"] = round(median(base), 3)
            out[f"runs_baseline_{key}"] = [round(v, 3) for v in base]
    if runs["baseline"]:
        out["full_rss_ratio_vs_baseline"] = round(
            out["full_rss_per_stream_kib"] / out["baseline_full_rss_per_stream_kib"], 3
        )
    if args.profile:
        out["full_profile"] = runs["this"][0]["profile"]
    if args.diagnose:
        out["full_diagnosis"] = runs["this"][0]["diagnosis"]
    out["goal_full_rss_per_stream_kib"] = GOAL_KIB
    out["goal_full_ttft_together_p50_s"] = GOAL_TTFT_S
    return out
