"""Benchmark P2: added latency from a model chunk to the subscriber's socket, at 100 live streams.

Drupe side: the real app (``create_app`` over an open runtime) on uvicorn (httptools, uvloop) in
this process, and ``--streams`` live streams started on the stream manager. Each stream's chunk
source is a paced "model": after a random phase it yields one text delta every ``--interval``
seconds, and the delta's text is ``time.monotonic_ns()`` taken right before the ``yield``. Each
stream has one subscriber: its own TCP connection doing ``GET /api/chat/{id}/stream`` (the AI SDK
resume route), from a separate client process (``--client``, raw asyncio protocols, no HTTP
library). The client stamps ``time.monotonic_ns()`` when a read returns, and the latency of every
frame completed by that read is the difference (CLOCK_MONOTONIC is system-wide on Linux, so the
two processes' clocks agree). The path measured: manager fan-out, ``SseListener``, coalesced
write, uvicorn, the kernel's loopback, the client's read.

    python bench/latency.py --quick   # 100 streams x 100 deltas every 20 ms
    python bench/latency.py           # 100 streams x 1,000 deltas every 10 ms

Baselines, in the same process with the same client, the same paced sources written to raw
anyio sockets (no manager, no listener, no framework): ``baseline_*`` writes in the source's own
task (the floor of this machine's loopback and scheduler); ``hop_baseline_*`` hands each frame
through a memory stream to a writer task first, the one task hop any design pays whose producer
must never wait on a socket (Drupe's listener contract).

Figures (the JSON last line): ``p50_ms``, ``p99_ms`` (goal P2: p50 <= 0.2 ms, p99 <= 2 ms),
``max_ms``, ``samples``, the chunk rate the server sustained, ``baseline_p50_ms`` /
``baseline_p99_ms`` and ``hop_baseline_p50_ms`` / ``hop_baseline_p99_ms``; ``p50_ratio`` /
``p99_ratio`` = Drupe's / the one-hop baseline's (issue 11 §3: <= 1.1 / <= 1.2).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

from _asgi_servers import SERVERS, bare_sse_app, serving
from _common import parse_args, run

GOAL_P50_MS = 0.2
GOAL_P99_MS = 2.0
GOAL_P50_RATIO = 1.1
GOAL_P99_RATIO = 1.2
"""Issue 11 §3: p50 <= 1.1x and p99 <= 1.2x the one-hop raw-socket baseline of the same run."""
_STAMP = re.compile(rb'"delta":"(\d+) "')


async def _paced(
    gate: anyio.Event, deltas: int, interval: float, phase: float
) -> AsyncIterator[dict[str, Any]]:
    await gate.wait()
    yield {"type": "start", "messageId": "msg_latency"}
    yield {"type": "start-step"}
    yield {"type": "text-start", "id": "t1"}
    await anyio.sleep(phase)
    for _ in range(deltas):
        await anyio.sleep(interval)
        yield {"type": "text-delta", "id": "t1", "delta": f"{time.monotonic_ns()} "}
    yield {"type": "text-end", "id": "t1"}
    yield {"type": "finish-step"}
    yield {"type": "finish", "finishReason": "stop"}


# --- clients (separate process) ---------------------------------------------------------


class _Reader(asyncio.Protocol):
    """One subscriber connection: records the latency of every stamped delta frame."""

    def __init__(
        self,
        request: bytes,
        latencies: list[int],
        on_headers: Callable[[], None],
        on_done: Callable[[], None],
    ) -> None:
        self.request = request
        self.latencies = latencies
        self.on_headers = on_headers
        self.on_done = on_done
        self.pending = b""
        self.headers_seen = False
        self.transport: Any = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        now = time.monotonic_ns()
        data = self.pending + data
        if not self.headers_seen:
            if b"\r\n\r\n" not in data:
                self.pending = data
                return
            self.headers_seen = True
            data = data.partition(b"\r\n\r\n")[2]
            self.on_headers()
        complete, sep, self.pending = data.rpartition(b"\n\n")
        if not sep:
            self.pending = data
            return
        for match in _STAMP.finditer(complete):
            self.latencies.append(now - int(match.group(1)))
        if b"data: [DONE]" in complete:
            self.transport.close()
            self.on_done()


async def _client_main(port: int, streams: int) -> None:
    loop = asyncio.get_running_loop()
    ready = anyio.Event()
    done = anyio.Event()
    state = {"headers": 0, "done": 0}
    latencies: list[int] = []

    def on_headers() -> None:
        state["headers"] += 1
        if state["headers"] == streams:
            ready.set()

    def on_done() -> None:
        state["done"] += 1
        if state["done"] == streams:
            done.set()

    for i in range(streams):
        request = f"GET /api/chat/lat-{i}/stream HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n".encode()
        reader = _Reader(request, latencies, on_headers, on_done)
        await loop.create_connection(lambda r=reader: r, "127.0.0.1", port)  # type: ignore[misc]
    await ready.wait()
    print("ready", flush=True)
    await done.wait()
    print(json.dumps({"latencies_ns": latencies}), flush=True)


# --- baseline: the same paced sources written straight to raw sockets ----------------------

_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)


async def _baseline(
    args: argparse.Namespace, deltas: int, interval: float, *, hop: bool
) -> list[float]:
    """Raw sockets; ``hop``: the source feeds a memory stream that a writer task drains."""
    import orjson
    from anyio.abc import SocketAttribute, SocketStream

    from drupe.chunks.sse import DONE_FRAME, encode_sse

    gate = anyio.Event()
    rng = random.Random(7)
    phases = [rng.random() * interval for _ in range(args.streams)]

    async def frames(index: int) -> AsyncIterator[bytes]:
        seq = 0
        async for chunk in _paced(gate, deltas, interval, phases[index]):
            seq += 1
            frame = encode_sse(orjson.dumps(chunk), event_id=f"turn/{seq}")
            yield b"%x\r\n%s\r\n" % (len(frame), frame)
        yield b"%x\r\n%s\r\n0\r\n\r\n" % (len(DONE_FRAME), DONE_FRAME)

    async def handle(stream: SocketStream) -> None:
        async with stream:
            received = b""
            while b"\r\n\r\n" not in received:
                received += await stream.receive(65536)
            index = int(received.split(b" ", 2)[1].split(b"/")[3].split(b"-")[1])
            await stream.send(_HEAD)
            if not hop:
                async for data in frames(index):
                    await stream.send(data)
                return
            send, receive = anyio.create_memory_object_stream[bytes](1024)

            async def produce() -> None:
                with send:
                    async for data in frames(index):
                        send.send_nowait(data)

            async with anyio.create_task_group() as inner:
                inner.start_soon(produce)
                with receive:
                    async for data in receive:
                        await stream.send(data)

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", backlog=1024)
    port = listener.extra(SocketAttribute.local_port)
    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle, tg)
        result = await _run_client(port, args.streams, gate.set)
        tg.cancel_scope.cancel()
    await listener.aclose()
    return [ns / 1e6 for ns in result["latencies_ns"]]


async def _run_client(port: int, streams: int, on_ready: Callable[[], None]) -> dict[str, Any]:
    command = [sys.executable, __file__, "--client", str(port), "--streams", str(streams)]
    async with await anyio.open_process(command, stdin=None, stderr=None) as process:
        assert process.stdout is not None
        lines = BufferedByteReceiveStream(process.stdout)
        line = await lines.receive_until(b"\n", 1024)
        if line != b"ready":
            raise SystemExit(f"client process said {line!r}")
        on_ready()
        result: dict[str, Any] = json.loads(await lines.receive_until(b"\n", 1 << 30))
        await process.wait()
    return result


# --- driver ---------------------------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


async def _served(
    args: argparse.Namespace, server: str, deltas: int, interval: float, bare: bool
) -> tuple[list[float], float]:
    """Latency samples (ms) and wall time of Drupe (or the bare ASGI pipe) on ``server``."""
    from drupe.api.app_factory import create_app
    from drupe.app import open_runtime
    from drupe.settings import AuthSettings, Settings
    from drupe.streaming.config import StreamConfig
    from drupe.streaming.manager import ExecutionSpec, SendInput

    rng = random.Random(7)
    phases = [rng.random() * interval for _ in range(args.streams)]
    gate = anyio.Event()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.toml"
        config.write_text('default_model = "scripted:echo"\n')
        settings = Settings(
            data_dir=Path(tmp),
            config_path=config,
            stream=StreamConfig(grace_period=0),
            auth=AuthSettings(enabled=False),  # --no-auth: the stream path is measured
        )
        async with open_runtime(settings) as runtime:
            if bare:
                app = bare_sse_app(
                    lambda i: _paced(gate, deltas, interval, phases[i]), lambda: None
                )
            else:
                app = create_app(runtime)
                for i in range(args.streams):

                    def source(phase: float = phases[i]) -> AsyncIterator[dict[str, Any]]:
                        return _paced(gate, deltas, interval, phase)

                    runtime.manager.send(
                        SendInput(
                            conversation_id=f"lat-{i}",
                            executions=[ExecutionSpec(model_id="bench", source=source)],
                            persistent=False,
                        )
                    )
            async with serving(app, server) as port:
                started = time.perf_counter()

                def go() -> None:
                    nonlocal started
                    started = time.perf_counter()
                    gate.set()

                result = await _run_client(port, args.streams, go)
                elapsed = time.perf_counter() - started
    return [ns / 1e6 for ns in result["latencies_ns"]], elapsed


def _summary(samples: list[float], hop: list[float]) -> dict[str, float]:
    p50, p99 = statistics.median(samples), _percentile(samples, 0.99)
    return {
        "p50_ms": round(p50, 4),
        "p99_ms": round(p99, 4),
        "p50_ratio": round(p50 / statistics.median(hop), 3),
        "p99_ratio": round(p99 / _percentile(hop, 0.99), 3),
    }


async def _servers(
    args: argparse.Namespace, deltas: int, interval: float, hop: list[float]
) -> dict[str, Any]:
    """``--server both``: Drupe and the bare ASGI pipe on each server, interleaved."""
    figures: dict[str, Any] = {}
    for server in SERVERS:
        for bare in (True, False):
            samples, _ = await _served(args, server, deltas, interval, bare)
            name = f"{server}_asgi_bare" if bare else server
            figures[name] = _summary(samples, hop)
            print(f"{name}: {figures[name]}")
    return figures


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    deltas = args.deltas or (100 if args.quick else 1_000)
    interval = args.interval or (0.02 if args.quick else 0.01)
    server = "uvicorn" if args.server == "both" else args.server
    samples, elapsed = await _served(args, server, deltas, interval, bare=False)
    expected = args.streams * deltas
    if len(samples) != expected:
        raise SystemExit(f"received {len(samples)} of {expected} stamped deltas")
    baseline = await _baseline(args, deltas, interval, hop=False)
    hop_baseline = await _baseline(args, deltas, interval, hop=True)
    p50, p99 = statistics.median(samples), _percentile(samples, 0.99)
    hop_p50, hop_p99 = statistics.median(hop_baseline), _percentile(hop_baseline, 0.99)
    print(
        f"drupe p50 {p50:.3f} ms / p99 {p99:.3f} ms; one-hop raw socket p50 {hop_p50:.3f} ms /"
        f" p99 {hop_p99:.3f} ms: ratios {p50 / hop_p50:.2f} / {p99 / hop_p99:.2f}"
    )
    servers = await _servers(args, deltas, interval, hop_baseline) if args.server == "both" else {}
    return {
        "bench": "latency",
        "server": server,
        "servers": servers,
        "streams": args.streams,
        "deltas": deltas,
        "interval_ms": interval * 1000,
        "samples": len(samples),
        "chunks_per_s": round(expected / elapsed),
        "p50_ms": round(statistics.median(samples), 4),
        "p99_ms": round(_percentile(samples, 0.99), 4),
        "max_ms": round(max(samples), 4),
        "baseline_p50_ms": round(statistics.median(baseline), 4),
        "baseline_p99_ms": round(_percentile(baseline, 0.99), 4),
        "hop_baseline_p50_ms": round(statistics.median(hop_baseline), 4),
        "hop_baseline_p99_ms": round(_percentile(hop_baseline, 0.99), 4),
        "p50_ratio": round(p50 / hop_p50, 3),
        "p99_ratio": round(p99 / hop_p99, 3),
        "goal_p50_ratio": GOAL_P50_RATIO,
        "goal_p99_ratio": GOAL_P99_RATIO,
        "meets_ratio_goal": p50 <= GOAL_P50_RATIO * hop_p50 and p99 <= GOAL_P99_RATIO * hop_p99,
        "goal_p50_ms": GOAL_P50_MS,
        "goal_p99_ms": GOAL_P99_MS,
    }


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--deltas", type=int, default=None, help="per stream (1,000; quick 100)")
    parser.add_argument("--interval", type=float, default=None, help="s between deltas")
    parser.add_argument(
        "--server",
        choices=("uvicorn", "granian", "both"),
        default="uvicorn",
        help="the ASGI server (both: also Drupe and the bare ASGI pipe on each, interleaved)",
    )
    parser.add_argument("--client", type=int, default=None, help=argparse.SUPPRESS)


if __name__ == "__main__":
    arguments = parse_args(__doc__.splitlines()[0], _arguments)
    if arguments.client is not None:
        anyio.run(
            _client_main, arguments.client, arguments.streams, backend_options={"use_uvloop": True}
        )
    else:
        run(lambda: _main(arguments), arguments)
