"""Issue 9 (scale-out): one conversation fanned out over a real cluster, takeover, workers.

Everything runs as real processes: ``drupe serve`` nodes in cluster mode on a fresh PostgreSQL
database (``drupe_mn_<hex>`` on ``DRUPE_TEST_POSTGRES_URL``'s server, dropped at the end) and a
private ``redis-server`` on a free loopback port (so its ``INFO stats`` counts only this
bench's traffic), started with ``tests/multinode/harness.py``'s ``Cluster`` (no balancer).
Subscribers are raw HTTP/1.1 readers in a separate client process (``--client-fanout``; they
count ``data:`` frames, no JSON parsing except on two sampled connections, whose text is checked
against the scripted answer).

1. **Fan-out** (``events_per_s``, ``ratio``): node A owns a conversation (``POST /api/chat`` on
   A); ``--subscribers`` (1,000) ``GET /api/chat/{id}/stream`` readers, half on node B, half on
   node C. Baseline in the same run, alternating with it: the same on ONE ``drupe serve`` with
   cluster mode off (the embedded SQLite), all readers on that node. The answer is the scripted
   profile ``bench-fanout`` (registered by this script in each node it starts): a short head
   ("Ready: "), a pause (time for the readers to attach; they can only attach once the turn
   exists), then ``--words`` lorem-ipsum words as fast as the model loop makes them (one delta
   per word, 6.3 characters on average). The window is from the first byte of the lorem text
   at any reader to the last ``[DONE]``. ``events_per_s`` = answer deltas x readers / window
   (the cluster delivers them merged: the owner coalesces deltas in 25 ms windows before they
   reach the log, so its readers get fewer, larger frames: ``frames_per_s`` counts those);
   ``cpu_ratio`` compares the same per CPU second of the server processes (steadier on a shared
   machine). Readers that attached after the lorem text had started (the pause was too short)
   are counted in ``late_subscribers``: they got the start as a replay.
2. **Redis bytes** (``redis_bytes_per_text_byte``): an answer of ``--paced-words`` words paced at
   200 (and 50) deltas/s on A, one reader on B and one on C: bytes Redis received
   (``total_net_input_bytes``) from the POST to the last ``[DONE]``, over the answer's text bytes.
   Everything the cluster sends counts (the owner's log writes, the three nodes' log reads, lease
   renewals, status writes, heartbeats and takeover sweeps); ``redis_idle_bytes_per_s`` is the
   idle share, measured before.
3. **Takeover** (``takeover_s``): a paced answer on A with a reader on B; A is killed with
   SIGKILL mid-answer; the time from the kill to the end of B's response (its ``error`` frame,
   then ``[DONE]``). Goal: lease TTL + 2 s (``--lease-ttl``: 10 s, the default; quick: 3 s).
4. **Workers** (``throughput_scaling``): ``drupe serve --workers 1`` and ``--workers 2`` in cluster
   mode on the same database and Redis; ``--streams`` short conversations, ``--concurrency`` at
   a time (a client process, ``--client-chat``), each a ``POST /api/chat`` read to ``[DONE]``;
   streams completed per second, 2 workers against 1 (runs alternate).

5. **At scale** (``--scale`` runs only this): ``--scale-streams`` (300) paced answers at
   ``--scale-rate`` (50) deltas/s on the 3 nodes, each followed by one subscriber on another
   node; Redis bytes and commands per stream, delivery, the latency the cluster adds
   (``bench/_cluster_scale.py`` says how each figure is made; goals: <= 3 bytes per text byte,
   <= 10 commands per stream-second, everything delivered).

    .venv/bin/python bench/cluster_fanout.py --quick   # ~2-3 minutes
    .venv/bin/python bench/cluster_fanout.py --scale --quick   # ~1 minute

The JSON last line has every figure; the goals (issue 9) are ``ratio`` >= 0.5,
``redis_bytes_per_text_byte`` <= 2.0, ``takeover_s`` <= ``lease_ttl_s`` + 2,
``throughput_scaling`` >= 1.6.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PROFILE = "bench-fanout"
HEAD = "Ready: "
MARKER = b"Lorem"
"""The lorem text's first word: its first byte at a reader opens the measurement window."""
GOAL_RATIO = 0.5
GOAL_REDIS = 2.0
GOAL_SCALING = 1.6
CONFIG = 'default_model = "scripted:echo"\n'


def _register_profile() -> None:
    """``scripted:bench-fanout?words=N&pause=S``: the head, a pause of S seconds, N words."""
    from drupe.agent.models.scripted import Pause, ScriptParams, Text, lorem, register_script

    def factory(params: ScriptParams) -> list[list[Any]]:
        words = params.integer("words", 300)
        pause = params.number("pause", 5.0)
        return [[Text(HEAD), Pause(pause), Text(lorem(words))]]

    register_script(PROFILE, factory)


def _serve(argv: list[str]) -> None:
    """Node mode: ``drupe <argv>`` with the bench's profile registered."""
    _register_profile()
    from drupe.cli.main import main

    sys.argv = ["drupe", *argv]
    main()


# --- processes ------------------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process (``/proc/<pid>/stat``)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    try:
        return [int(p) for p in path.read_text().split()]
    except FileNotFoundError:
        return []


def _cpu(pids: list[int]) -> float:
    return sum(_cpu_seconds(pid) for pid in pids)


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) clock ticks of every core since boot (``/proc/stat``)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _pids_named(name: str) -> list[int]:
    """Every process whose command name is ``name`` (e.g. all PostgreSQL backends)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == name:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _free_port() -> int:
    """Below the ephemeral range (the thousands of reader connections use that range)."""
    from tests.multinode.harness import free_port

    return free_port()


@contextmanager
def _redis_server(work: Path) -> Iterator[tuple[str, Any]]:
    """A private ``redis-server`` on a free loopback port: its URL and a client."""
    import redis

    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    port = _free_port()
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(work)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    client = redis.Redis(host="127.0.0.1", port=port)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}/0", client
    finally:
        client.close()
        proc.terminate()
        proc.wait(timeout=10)


def _input_bytes(client: Any) -> int:
    return int(client.info("stats")["total_net_input_bytes"])


def _cluster_class() -> Any:
    from tests.multinode.harness import Cluster

    class BenchCluster(Cluster):
        """The harness's cluster, its nodes started through this script (the bench profile)."""

        def _spawn(self, node: Any) -> None:
            with node.log_path.open("a") as log:
                node.process = subprocess.Popen(
                    [
                        sys.executable,
                        __file__,
                        "--drupe",
                        "serve",
                        "--no-auth",
                        "--port",
                        str(node.port),
                    ],
                    stdout=subprocess.PIPE,
                    stderr=log,
                    text=True,
                    env=node.env,
                    cwd=self.work_dir,
                )

    return BenchCluster


def _wait_idle(url: str, timeout: float = 60.0) -> None:
    """Wait until the node streams nothing (its last answer is settled)."""
    import httpx

    deadline = time.monotonic() + timeout
    while httpx.get(f"{url}/api/status", timeout=30).json()["liveStreams"]:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} kept streaming")
        time.sleep(0.05)


def _chat_body(conversation: str, model: str) -> dict[str, Any]:
    return {
        "id": conversation,
        "trigger": "submit-message",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}],
        "models": [model],
    }


def _start_turn(url: str, conversation: str, model: str) -> None:
    """POST the turn on its owner; return once the head was streamed (the turn exists), closing
    the connection (that never stops the answer)."""
    import httpx

    with httpx.stream(
        "POST", f"{url}/api/chat", json=_chat_body(conversation, model), timeout=60
    ) as r:
        if r.status_code != 200:
            raise SystemExit(f"POST /api/chat on {url}: {r.status_code} {r.read()!r}")
        for line in r.iter_lines():
            if HEAD in line:
                return
    raise SystemExit(f"the answer on {url} ended before its head")


class _Reader(threading.Thread):
    """Reads one SSE response to its end (a few connections: the orchestrator's own readers)."""

    def __init__(self, method: str, url: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(daemon=True)
        self.method, self.url, self.body = method, url, body
        self.events: list[Any] = []
        self.speaking = threading.Event()
        self.ended_at: float | None = None
        self.status: int | None = None
        self.failed = False

    def run(self) -> None:
        import httpx

        try:
            with httpx.stream(self.method, self.url, json=self.body, timeout=120) as response:
                self.status = response.status_code
                for line in response.iter_lines():
                    if line.startswith("data: "):
                        raw = line.removeprefix("data: ")
                        self.events.append(raw if raw == "[DONE]" else json.loads(raw))
                        if '"text-delta"' in raw:
                            self.speaking.set()
        except httpx.HTTPError:
            self.failed = True  # the node it reads from was killed
        self.ended_at = time.monotonic()


# --- clients (a separate process) -----------------------------------------------------------


def _dechunk(body: bytes) -> bytes:
    out = bytearray()
    while body:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += body[:size]
        body = body[size + 2 :]
    return bytes(out)


def _text_of(body: bytes) -> tuple[str, str | None]:
    """The concatenated text deltas of an SSE body, and the last ``error`` frame's text."""
    text: list[str] = []
    error = None
    for line in _dechunk(body).split(b"\n"):
        if line.startswith(b"data: {"):
            chunk = json.loads(line[6:])
            if chunk["type"] == "text-delta":
                text.append(chunk["delta"])
            elif chunk["type"] == "error":
                error = chunk.get("errorText")
    return "".join(text), error


class _Counter(asyncio.Protocol):
    """One subscriber: sends the request, counts ``data: `` frames until ``[DONE]``."""

    def __init__(self, request: bytes, state: _FanoutState, keep: bool) -> None:
        self.request = request
        self.state = state
        self.keep = keep
        self.kept = bytearray()
        self.head = b""
        self.status = 0
        self.tail = b""
        self.frames = 0
        self.done = False
        self.transport: asyncio.Transport | None = None

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
            self.head = b""
            self.state.on_headers()
            if self.status != 200:
                self.finish()
                return
            if not data:
                return
        if self.keep:
            self.kept += data
        window = self.tail + data
        if self.state.first_text is None and MARKER in window:
            self.state.on_first_text()
        self.frames += window.count(b"data: ") - self.tail.count(b"data: ")
        if b"data: [DONE]" in window:
            self.finish()
            return
        self.tail = window[-16:]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done:
            self.finish()

    def finish(self) -> None:
        if self.done:
            return
        self.done = True
        self.state.last_done = time.perf_counter()
        assert self.transport is not None
        self.transport.close()
        self.state.on_done()


class _FanoutState:
    def __init__(self, connections: int) -> None:
        self.connections = connections
        self.headers = 0
        self.finished = 0
        self.first_text: float | None = None
        self.attached_at_first_text = 0
        self.last_done = 0.0
        self.all_done = anyio.Event()

    def on_headers(self) -> None:
        self.headers += 1
        if self.headers == self.connections:
            print("ready", flush=True)

    def on_first_text(self) -> None:
        self.first_text = time.perf_counter()
        self.attached_at_first_text = self.headers
        print("text", flush=True)

    def on_done(self) -> None:
        self.finished += 1
        if self.finished == self.connections:
            self.all_done.set()


async def _client_fanout(spec: dict[str, Any]) -> None:
    """Open the readers of ``spec`` (``targets``: [[port, count], ...], ``conversation``,
    ``words``); print ``ready`` / ``text`` when they happen, then one JSON line."""
    from drupe.agent.models.scripted import lorem

    loop = asyncio.get_running_loop()
    request = (
        f"GET /api/chat/{spec['conversation']}/stream HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"
    ).encode()
    total = sum(count for _, count in spec["targets"])
    state = _FanoutState(total)
    counters: list[_Counter] = []
    for port, count in spec["targets"]:
        for i in range(count):
            counter = _Counter(request, state, keep=i in (0, count - 1))
            await loop.create_connection(lambda c=counter: c, "127.0.0.1", port)  # type: ignore[misc]
            counters.append(counter)
    with anyio.move_on_after(spec.get("timeout", 120)):
        await state.all_done.wait()
    if not state.all_done.is_set():
        statuses = sorted({c.status for c in counters})
        stuck = [c for c in counters if not c.done]
        raise SystemExit(
            f"readers timed out: {state.headers} of {total} had headers, {state.finished} "
            f"finished, statuses {statuses}; {len(stuck)} stuck, e.g. {stuck[0].frames} frames, "
            f"tail {stuck[0].tail!r}"
        ) from None
    expected = HEAD + lorem(spec["words"])
    samples = [_text_of(bytes(c.kept))[0] for c in counters if c.keep and c.status == 200]
    print(
        json.dumps(
            {
                "frames": sum(c.frames for c in counters),
                "ok": sum(1 for c in counters if c.status == 200),
                "statuses": sorted({c.status for c in counters}),
                "late": total - state.attached_at_first_text,
                "seconds": state.last_done - (state.first_text or state.last_done),
                "samples_ok": bool(samples) and all(s == expected for s in samples),
            }
        ),
        flush=True,
    )


async def _client_chat(spec: dict[str, Any]) -> None:
    """``spec['streams']`` turns (``POST /api/chat``), ``concurrency`` at a time, each on its
    own connection and read to ``[DONE]``; one JSON line: how many ended well and how long."""
    queue = list(range(spec["streams"]))
    ok = 0
    failed: list[str] = []

    async def one(index: int) -> None:
        nonlocal ok
        body = json.dumps(_chat_body(f"{spec['tag']}-{index}", spec["model"])).encode()
        received = b""
        async with await anyio.connect_tcp("127.0.0.1", spec["port"]) as stream:
            await stream.send(
                b"POST /api/chat HTTP/1.1\r\nhost: 127.0.0.1\r\n"
                b"content-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                % (len(body), body)
            )
            while b"data: [DONE]" not in received[-64:]:
                try:
                    received += await stream.receive(65536)
                except anyio.EndOfStream:
                    break
        if b" 200 " in received[:16] and b'"type":"finish"' in received:
            ok += 1
        else:
            failed.append(received[:200].decode(errors="replace"))

    async def slot() -> None:
        while queue:
            await one(queue.pop())

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(spec["concurrency"]):
            tg.start_soon(slot)
    seconds = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime
    print(
        json.dumps({"ok": ok, "failed": failed[:3], "seconds": seconds, "cpu_s": cpu}), flush=True
    )


def _run_client(
    mode: str, spec: dict[str, Any], on_line: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Run a client process; ``on_line`` sees its progress lines; returns its JSON line."""
    command = [sys.executable, __file__, mode, json.dumps(spec)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.strip()
            if line.startswith("{"):
                result: dict[str, Any] = json.loads(line)
                break
            if on_line is not None:
                on_line(line)
        else:
            raise SystemExit(f"the {mode} client process failed ({proc.wait()})")
    return result


# --- phases ---------------------------------------------------------------------------------


def _fanout_run(
    owner: str,
    targets: list[tuple[int, int]],
    pids: list[int],
    redis: Any,
    conversation: str,
    words: int,
    pause: float,
) -> dict[str, Any]:
    """One fan-out: start the answer on ``owner``, attach the readers, wait for every end."""
    from drupe.agent.models.scripted import lorem

    model = f"scripted:{PROFILE}?words={words}&pause={pause:g}"
    _start_turn(owner, conversation, model)
    marks: dict[str, tuple[float, int]] = {}

    def on_line(line: str) -> None:
        if line == "text":
            marks["text"] = (_cpu(pids), _input_bytes(redis))

    spec = {"targets": targets, "conversation": conversation, "words": words}
    result = _run_client("--client-fanout", spec, on_line)
    cpu_end, bytes_end = _cpu(pids), _input_bytes(redis)
    subscribers = sum(count for _, count in targets)
    if result["ok"] != subscribers or not result["samples_ok"]:
        raise SystemExit(f"fan-out {conversation}: readers failed: {result}")
    cpu_start, bytes_start = marks["text"]
    deltas = words  # one delta per word (the head was streamed before the window)
    seconds = max(result["seconds"], 1e-6)
    cpu = max(cpu_end - cpu_start, 1e-6)
    return {
        "events_per_s": deltas * subscribers / seconds,
        "frames_per_s": result["frames"] / seconds,
        "frames_per_subscriber": result["frames"] / subscribers,
        "events_per_cpu_s": deltas * subscribers / cpu,
        "seconds": seconds,
        "cpu_s": cpu,
        "late": result["late"],
        "redis_bytes_per_text_byte": (bytes_end - bytes_start) / len(lorem(words).encode()),
    }


def _fanout_phase(
    cluster: Any, single: Any, redis: Any, args: argparse.Namespace, words: int, repeat: int
) -> dict[str, Any]:
    from statistics import median

    a, b, c = cluster.nodes
    half = args.subscribers // 2
    cluster_targets = [(b.port, half), (c.port, args.subscribers - half)]
    (node,) = single.nodes
    pause = args.pause or max(3.0, args.subscribers / 150)
    runs: dict[str, list[dict[str, Any]]] = {"cluster": [], "single": []}
    for i in range(repeat):
        for variant in ("single", "cluster"):
            if variant == "single":
                run = _fanout_run(
                    node.url, [(node.port, args.subscribers)], [node.pid], redis,
                    f"single-{i}", words, pause,
                )  # fmt: skip
                _wait_idle(node.url)
            else:
                run = _fanout_run(
                    a.url, cluster_targets, [n.pid for n in cluster.nodes], redis,
                    f"fan-{i}", words, pause,
                )  # fmt: skip
                _wait_idle(a.url)
            runs[variant].append(run)
            print(
                f"  {variant:7} run {i + 1}: {run['events_per_s']:,.0f} events/s "
                f"({run['frames_per_s']:,.0f} frames/s, {run['seconds']:.2f} s, "
                f"{run['cpu_s']:.2f} CPU s, {run['late']} late)",
                flush=True,
            )
            if run["late"]:
                pause *= 1.5  # the readers needed longer to attach: give them more next time

    def med(variant: str, key: str) -> float:
        return float(median(r[key] for r in runs[variant]))

    events, base = med("cluster", "events_per_s"), med("single", "events_per_s")
    per_cpu, base_per_cpu = med("cluster", "events_per_cpu_s"), med("single", "events_per_cpu_s")
    return {
        "events_per_s": round(events),
        "baseline_events_per_s": round(base),
        "ratio": round(events / base, 3),
        "events_per_cpu_s": round(per_cpu),
        "baseline_events_per_cpu_s": round(base_per_cpu),
        "cpu_ratio": round(per_cpu / base_per_cpu, 3),
        "frames_per_s": round(med("cluster", "frames_per_s")),
        "baseline_frames_per_s": round(med("single", "frames_per_s")),
        "frames_per_subscriber": round(med("cluster", "frames_per_subscriber"), 1),
        "baseline_frames_per_subscriber": round(med("single", "frames_per_subscriber"), 1),
        "fanout_redis_bytes_per_text_byte": round(med("cluster", "redis_bytes_per_text_byte"), 3),
        "late_subscribers": sum(r["late"] for v in runs.values() for r in v),
        "runs_events_per_s": [round(r["events_per_s"]) for r in runs["cluster"]],
        "runs_baseline_events_per_s": [round(r["events_per_s"]) for r in runs["single"]],
    }


def _paced_redis(
    cluster: Any, redis: Any, words: int, rate: int, conversation: str
) -> tuple[float, float]:
    """Redis bytes received per text byte for a paced answer on A with readers on B and C,
    and how long it took (seconds)."""
    from drupe.agent.models.scripted import lorem

    a, b, c = cluster.nodes
    before, started = _input_bytes(redis), time.monotonic()
    model = f"scripted:lorem?words={words}&rate={rate}"
    submit = _Reader("POST", f"{a.url}/api/chat", _chat_body(conversation, model))
    submit.start()
    if not submit.speaking.wait(60):
        raise SystemExit("the paced answer never started")
    readers = [_Reader("GET", f"{n.url}/api/chat/{conversation}/stream") for n in (b, c)]
    for reader in readers:
        reader.start()
    for reader in (submit, *readers):
        reader.join(120)
        if reader.status != 200 or reader.events[-1:] != ["[DONE]"]:
            raise SystemExit(f"a paced reader failed: {reader.status} {reader.events[-2:]}")
    after, seconds = _input_bytes(redis), time.monotonic() - started
    _wait_idle(a.url)
    return (after - before) / len(lorem(words).encode()), seconds


def _redis_phase(cluster: Any, redis: Any, words: int) -> dict[str, Any]:
    from drupe.agent.models.scripted import lorem

    idle_before = _input_bytes(redis)
    time.sleep(2.0)  # the cluster's idle traffic: heartbeats, lease checks, sweeps
    idle = (_input_bytes(redis) - idle_before) / 2.0
    out: dict[str, Any] = {"redis_idle_bytes_per_s": round(idle)}
    text = len(lorem(words).encode())
    for rate in (200, 50):
        ratio, seconds = _paced_redis(cluster, redis, words, rate, f"paced-{rate}")
        idle_share = idle * seconds / (ratio * text)
        out[f"redis_bytes_per_text_byte_at_{rate}_per_s"] = round(ratio, 3)
        out[f"redis_idle_share_at_{rate}_per_s"] = round(idle_share, 3)
        print(
            f"  paced at {rate} deltas/s: {ratio:.2f} Redis bytes per text byte "
            f"({idle_share:.0%} of them the idle traffic)",
            flush=True,
        )
    out["redis_bytes_per_text_byte"] = out["redis_bytes_per_text_byte_at_200_per_s"]
    return out


def _takeover_phase(cluster: Any, rounds: int, ttl: float) -> dict[str, Any]:
    from statistics import median

    times: list[float] = []
    for i in range(rounds):
        owner = cluster.nodes[i % 3]
        follower = cluster.nodes[(i + 1) % 3]
        conversation = f"takeover-{i}"
        model = "scripted:lorem?words=2000&rate=40"
        submit = _Reader("POST", f"{owner.url}/api/chat", _chat_body(conversation, model))
        submit.start()
        if not submit.speaking.wait(60):
            raise SystemExit("the owner never started answering")
        follow = _Reader("GET", f"{follower.url}/api/chat/{conversation}/stream")
        follow.start()
        if not follow.speaking.wait(60):
            raise SystemExit("the follower never saw the answer")
        time.sleep(0.5)  # mid-answer
        cluster.kill9(owner)
        killed_at = time.monotonic()
        follow.join(ttl * 4 + 30)
        if follow.ended_at is None:
            raise SystemExit("the surviving reader got no terminal")
        last = follow.events[-2:]
        if len(last) != 2 or last[1] != "[DONE]" or last[0].get("type") != "error":
            raise SystemExit(f"the surviving reader did not end with an error: {last}")
        times.append(follow.ended_at - killed_at)
        print(f"  takeover {i + 1}: {times[-1]:.2f} s after kill -9 (TTL {ttl:g} s)", flush=True)
        submit.join(10)
        if i + 1 < rounds:
            cluster.restart(owner)
    return {
        "takeover_s": round(median(times), 3),
        "runs_takeover_s": [round(t, 3) for t in times],
        "lease_ttl_s": ttl,
        "goal_takeover_s": ttl + 2.0,
    }


def _serve_workers(
    workers: int, work: Path, database: str, redis_url: str, ttl: float
) -> tuple[subprocess.Popen[str], int]:
    from tests.multinode.harness import await_announce

    env = {k: v for k, v in os.environ.items() if not k.startswith("DRUPE_")}
    env |= {
        "PYTHONUNBUFFERED": "1",
        "DRUPE_REDIS_PREFIX": f"w{workers}",
        "DRUPE_NODE_ID": f"w{workers}",
        "DRUPE_LEASE_TTL": str(ttl),
    }
    data = work / f"workers-{workers}"
    data.mkdir()
    (data / "config.toml").write_text(CONFIG)
    log = data / "serve.log"
    with log.open("a") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "drupe", "serve", "--no-auth", "--port", "0",
             "--workers", str(workers),
             "--data-dir", str(data), "--config", str(data / "config.toml"),
             "--database-url", database, "--redis-url", redis_url],
            stdout=subprocess.PIPE, stderr=stderr, text=True, env=env,
        )  # fmt: skip
    url = await_announce(process, log, f"drupe serve --workers {workers}")
    return process, int(url.rsplit(":", 1)[1].strip("/"))


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            for pid in _children(process.pid):
                os.kill(pid, signal.SIGKILL)
            process.kill()
            process.wait()
    if process.stdout is not None:
        process.stdout.close()


def _scaling_phase(
    work: Path, database: str, redis_url: str, ttl: float, args: argparse.Namespace, repeat: int
) -> dict[str, Any]:
    from statistics import median

    servers: dict[int, tuple[subprocess.Popen[str], int]] = {}
    rates: dict[int, list[float]] = {1: [], 2: []}
    cpu_per_stream: dict[int, list[float]] = {1: [], 2: []}
    cores_used: dict[int, list[float]] = {1: [], 2: []}
    busy: dict[int, list[float]] = {1: [], 2: []}
    client_cpu: dict[int, list[float]] = {1: [], 2: []}
    service_cores: dict[int, list[float]] = {1: [], 2: []}
    model = f"scripted:lorem?words={args.stream_words}&rate={args.stream_rate:g}"
    try:
        for workers in (1, 2):
            servers[workers] = _serve_workers(workers, work, database, redis_url, ttl)
        for i in range(repeat):
            for workers in (1, 2):
                process, port = servers[workers]
                pids = [process.pid, *_children(process.pid)]  # the parent serves when N = 1
                cpu_before = _cpu(pids)
                busy_before, total_before = _machine_ticks()
                services_pids = _pids_named("postgres") + _pids_named("redis-server")
                services_before = _cpu(services_pids)
                spec = {
                    "port": port,
                    "streams": args.streams,
                    "concurrency": args.concurrency,
                    "model": model,
                    "tag": f"w{workers}-{i}",
                }
                result = _run_client("--client-chat", spec)
                cpu = _cpu(pids) - cpu_before
                busy_after, total_after = _machine_ticks()
                service_cores[workers].append(
                    (_cpu(services_pids) - services_before) / result["seconds"]
                )
                busy[workers].append((busy_after - busy_before) / (total_after - total_before))
                client_cpu[workers].append(result["cpu_s"] / result["seconds"])
                if result["ok"] != args.streams:
                    raise SystemExit(f"--workers {workers}: streams failed: {result}")
                rates[workers].append(result["ok"] / result["seconds"])
                cpu_per_stream[workers].append(cpu / result["ok"])
                cores_used[workers].append(cpu / result["seconds"])
                print(
                    f"  --workers {workers} run {i + 1}: {rates[workers][-1]:.1f} streams/s "
                    f"({result['seconds']:.2f} s; the workers used {cores_used[workers][-1]:.2f} "
                    f"cores, the client {client_cpu[workers][-1]:.2f}, PostgreSQL and Redis "
                    f"{service_cores[workers][-1]:.2f}; the machine was "
                    f"{busy[workers][-1]:.0%} busy)",
                    flush=True,
                )
    finally:
        for process, _ in servers.values():
            _stop(process)
    one, two = median(rates[1]), median(rates[2])
    return {
        "streams_per_s_workers_1": round(one, 2),
        "streams_per_s_workers_2": round(two, 2),
        "throughput_scaling": round(two / one, 3),
        "cpu_ms_per_stream_workers_1": round(median(cpu_per_stream[1]) * 1000, 1),
        "cpu_ms_per_stream_workers_2": round(median(cpu_per_stream[2]) * 1000, 1),
        "cores_used_workers_1": round(median(cores_used[1]), 2),
        "cores_used_workers_2": round(median(cores_used[2]), 2),
        "client_cores_used": round(median(client_cpu[1] + client_cpu[2]), 2),
        "services_cores_used_workers_1": round(median(service_cores[1]), 2),
        "services_cores_used_workers_2": round(median(service_cores[2]), 2),
        "machine_busy_workers_1": round(median(busy[1]), 2),
        "machine_busy_workers_2": round(median(busy[2]), 2),
        "cores": os.cpu_count(),
        "runs_streams_per_s_workers_1": [round(r, 2) for r in rates[1]],
        "runs_streams_per_s_workers_2": [round(r, 2) for r in rates[2]],
    }


def _scale_phase(cluster: Any, redis: Any, args: argparse.Namespace) -> dict[str, Any]:
    from statistics import median

    from bench._cluster_scale import redis_counters, scale_figures

    from drupe.agent.models.scripted import lorem

    words = args.scale_words or (100 if args.quick else 300)
    streams = args.scale_streams
    model = f"scripted:lorem?words={words}&rate={args.scale_rate:g}"
    nodes = cluster.nodes
    runs: list[dict[str, Any]] = []
    for i in range(args.scale_repeat):
        pairs = [
            (f"scale-{i}-{k}", nodes[k % 3].port, nodes[(k + 1) % 3].port) for k in range(streams)
        ]
        before = redis_counters(redis)
        client = _run_client("--client-scale", {"pairs": pairs, "words": words, "model": model})
        after = redis_counters(redis)
        if client["errors"]:
            raise SystemExit(f"scale run {i + 1}: {client['errors']}")
        run = scale_figures(before, after, client, len(lorem(words).encode()) * streams)
        runs.append(run)
        print(
            f"  scale run {i + 1}: {run['scale_redis_bytes_per_text_byte']} Redis bytes per text "
            f"byte, {run['scale_redis_commands_per_stream_s']} commands per stream-s, delivered "
            f"{run['scale_delivered_ratio']} ({run['scale_exact_answers']} exact), added p50 "
            f"{run['scale_p50_added_ms']} ms p99 {run['scale_p99_added_ms']} ms, Redis "
            f"{run['scale_redis_cpu_s_per_1000_stream_s']} CPU s per 1,000 stream-s, "
            f"{run['scale_redis_commands_per_answer']} commands per answer, follower done "
            f"p50 {run['scale_p50_follower_done_s']} s p99 {run['scale_p99_follower_done_s']} s "
            f"(streams {run['scale_median_stream_s']} s each, {run['scale_elapsed_s']} s in all)",
            flush=True,
        )
        for node in nodes:
            _wait_idle(node.url, timeout=120)
    out: dict[str, Any] = {"scale_streams": streams, "scale_words": words}
    for key in runs[0]:
        values = [r[key] for r in runs]
        if all(isinstance(v, (int, float)) for v in values):
            out[key] = round(float(median(values)), 3)
            out[f"runs_{key}"] = values
        else:
            out[key] = values[-1] if len(values) == 1 else values
    out["goal_scale_redis_bytes_per_text_byte"] = 3
    out["goal_scale_redis_commands_per_stream_s"] = 10
    return out


def _bench_scale(args: argparse.Namespace) -> dict[str, Any]:
    from tests.multinode import services

    figures: dict[str, Any] = {"bench": "cluster_fanout --scale", "quick": bool(args.quick)}
    cluster_class = _cluster_class()
    with tempfile.TemporaryDirectory() as tmp, _redis_server(Path(tmp)) as (redis_url, redis):
        work = Path(tmp)
        config = work / "config.toml"
        config.write_text(CONFIG)
        database = services.new_database()
        try:
            cluster = cluster_class(
                database_url=database, redis_url=redis_url, prefix="bench",
                work_dir=work / "cluster", config=config, size=3, balancer=False,
            )  # fmt: skip
            (work / "cluster").mkdir()
            try:
                cluster.start()
                print(
                    f"scale: {args.scale_streams} answers at {args.scale_rate:g} deltas/s on 3 "
                    "nodes, each followed on another node"
                )
                figures |= _scale_phase(cluster, redis, args)
            finally:
                cluster.close()
        finally:
            services.drop_database(database)
    return figures


def _bench(args: argparse.Namespace) -> dict[str, Any]:
    from tests.multinode import services

    if args.scale:
        return _bench_scale(args)

    quick = args.quick
    words = args.words or (1_000 if quick else 2_000)
    repeat = args.repeat or (2 if quick else 3)
    ttl = args.lease_ttl or (3.0 if quick else 10.0)
    paced_words = args.paced_words or (200 if quick else 1_000)
    rounds = args.takeovers or (1 if quick else 3)
    figures: dict[str, Any] = {
        "bench": "cluster_fanout",
        "subscribers": args.subscribers,
        "words": words,
        "repeat": repeat,
    }
    cluster_class = _cluster_class()
    with tempfile.TemporaryDirectory() as tmp, _redis_server(Path(tmp)) as (redis_url, redis):
        work = Path(tmp)
        config = work / "config.toml"
        config.write_text(CONFIG)
        database = services.new_database()
        try:
            cluster = cluster_class(
                database_url=database, redis_url=redis_url, prefix="bench",
                work_dir=work / "cluster", config=config, size=3, balancer=False,
                env={"DRUPE_LEASE_TTL": str(ttl)},
            )  # fmt: skip
            # Cluster mode off: no database or Redis URL, so the node runs on its own SQLite.
            single = cluster_class(
                database_url="", redis_url="", prefix="single", work_dir=work / "single",
                config=config, size=1, balancer=False,
            )  # fmt: skip
            (work / "cluster").mkdir()
            (work / "single").mkdir()
            try:
                started = time.monotonic()
                cluster.start()
                single.start()
                print(f"3 cluster nodes and 1 single node up in {time.monotonic() - started:.1f} s")
                print(f"fan-out: 1 conversation x {args.subscribers} subscribers x {words} words")
                figures |= _fanout_phase(cluster, single, redis, args, words, repeat)
                print(f"Redis bytes: {paced_words} paced words, readers on two other nodes")
                figures |= _redis_phase(cluster, redis, paced_words)
                print(f"takeover: kill -9 of the owner, lease TTL {ttl:g} s")
                figures |= _takeover_phase(cluster, rounds, ttl)
            finally:
                cluster.close()
                single.close()
            print(
                f"workers: {args.streams} streams ({args.concurrency} at a time) of "
                f"{args.stream_words} words at {args.stream_rate:g}/s, --workers 1 vs 2"
            )
            scaling_repeat = args.scaling_repeat or (3 if quick else 5)
            figures |= _scaling_phase(work, database, redis_url, ttl, args, scaling_repeat)
        finally:
            services.drop_database(database)
    figures["goal_ratio"] = GOAL_RATIO
    figures["goal_redis_bytes_per_text_byte"] = GOAL_REDIS
    figures["goal_throughput_scaling"] = GOAL_SCALING
    figures["quick"] = bool(quick)
    return figures


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--subscribers", type=int, default=1_000)
    parser.add_argument(
        "--words", type=int, default=None, help="fan-out answer (2,000; quick 1,000)"
    )
    parser.add_argument("--repeat", type=int, default=None, help="runs per variant (3; quick 2)")
    parser.add_argument("--pause", type=float, default=None, help="seconds to attach the readers")
    parser.add_argument("--paced-words", type=int, default=None, help="(1,000; quick 200)")
    parser.add_argument("--lease-ttl", type=float, default=None, help="seconds (10; quick 3)")
    parser.add_argument("--takeovers", type=int, default=None, help="kill -9 rounds (3; quick 1)")
    parser.add_argument("--streams", type=int, default=200, help="streams per workers run")
    parser.add_argument("--scaling-repeat", type=int, default=None, help="runs each (5; quick 3)")
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--stream-words", type=int, default=20)
    parser.add_argument("--stream-rate", type=float, default=50.0, help="deltas/s of a stream")
    parser.add_argument("--scale", action="store_true", help="only the at-scale phase (5.)")
    parser.add_argument("--scale-streams", type=int, default=300)
    parser.add_argument("--scale-words", type=int, default=None, help="(300; quick 100)")
    parser.add_argument("--scale-rate", type=float, default=50.0, help="deltas/s of an answer")
    parser.add_argument("--scale-repeat", type=int, default=2, help="runs (2)")


def main() -> None:
    if sys.argv[1:2] == ["--drupe"]:
        _serve(sys.argv[2:])
        return
    if sys.argv[1:2] == ["--client-scale"]:
        from bench._cluster_scale import client_scale

        anyio.run(client_scale, json.loads(sys.argv[2]), backend_options={"use_uvloop": True})
        return
    if sys.argv[1:2] in (["--client-fanout"], ["--client-chat"]):
        client = _client_fanout if sys.argv[1] == "--client-fanout" else _client_chat
        anyio.run(client, json.loads(sys.argv[2]), backend_options={"use_uvloop": True})
        return
    from bench._common import emit, parse_args

    args = parse_args(__doc__.splitlines()[0] if __doc__ else "", _arguments)
    emit(_bench(args))


if __name__ == "__main__":
    main()
