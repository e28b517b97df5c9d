"""Benchmark P1 over HTTP: one conversation fanned out to 1,000 SSE connections on loopback.

Drupe side: the real app (``create_app`` over an open runtime) on uvicorn (httptools, uvloop)
in this process. One live stream is started on the stream manager with a gated chunk source
(``--deltas`` token-sized text deltas plus the envelope chunks; the source hands the loop back
every ``--burst`` chunks, as a model socket read returning several chunks does). Every
subscriber is its own TCP connection doing ``GET /api/chat/{id}/stream`` (the AI SDK resume
route: ``SseListener`` + coalesced writes). The gate opens once every connection has its
response headers (so every listener is attached).

Baseline, in the same process and with the same clients: a bare coalesced-socket fan-out of
the same bytes: a raw anyio TCP server that answers each connection with the same headers, and
a producer that appends the same pre-encoded frames (``encode_sse`` with the same ``id:``
cursors) to every connection's buffer, each connection writing everything queued in one
``send`` per wake-up. No framework, no manager, no listener.

Clients: a separate process (``--client``) with one raw socket reader per connection (anyio
TCP streams; counts ``data: `` events, no parsing), so the readers do not steal the server's
core. Runs alternate (baseline, drupe, ...); figures are medians.

    python bench/http_fanout.py --quick   # 1,000 subscribers x 300 deltas, 2 runs each
    python bench/http_fanout.py           # 1,000 subscribers x 2,000 deltas, 3 runs each

Figures (the JSON last line): ``events_per_s`` (events received by all clients / time from the
first body byte to the last), ``baseline_events_per_s``, ``ratio`` (goal P1 >= 0.5).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
from anyio.abc import SocketAttribute
from anyio.streams.buffered import BufferedByteReceiveStream

from _common import median, parse_args, run, token_deltas

GOAL_RATIO = 0.5
PATH = "/api/chat/bench/stream"
HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"x-vercel-ai-ui-message-stream: v1\r\nx-accel-buffering: no\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)


def _chunks(deltas: int) -> list[dict[str, Any]]:
    return [
        {"type": "start", "messageId": "msg_bench"},
        {"type": "start-step"},
        {"type": "text-start", "id": "t1"},
        *({"type": "text-delta", "id": "t1", "delta": d} for d in token_deltas(deltas)),
        {"type": "text-end", "id": "t1"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop"},
    ]


async def _gated(
    chunks: list[dict[str, Any]], burst: int, gate: anyio.Event
) -> AsyncIterator[dict[str, Any]]:
    await gate.wait()
    for index, chunk in enumerate(chunks, 1):
        yield chunk
        if index % burst == 0:
            await anyio.lowlevel.checkpoint()


def _listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(4096)
    return sock


# --- clients (separate process) ---------------------------------------------------------


class _Counter(asyncio.Protocol):
    """One client connection: sends the request, counts ``data: `` events until ``[DONE]``."""

    def __init__(self, request: bytes, on_headers: Callable[[], None], on_done: Callable[[], None]):
        self.request = request
        self.on_headers = on_headers
        self.on_done = on_done
        self.head = b""
        self.headers_seen = False
        self.tail = b""
        self.events = 0
        self.first = 0.0
        self.last = 0.0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        if not self.headers_seen:
            self.head += data
            if b"\r\n\r\n" not in self.head:
                return
            self.headers_seen = True
            data = self.head.partition(b"\r\n\r\n")[2]
            self.head = b""
            self.on_headers()
            if not data:
                return
        if not self.first:
            self.first = time.perf_counter()
        window = self.tail + data
        self.events += window.count(b"data: ") - self.tail.count(b"data: ")
        if b"data: [DONE]" in window:
            self.last = time.perf_counter()
            assert self.transport is not None
            self.transport.close()
            self.on_done()
            return
        self.tail = window[-16:]


async def _client_main(port: int, connections: int) -> None:
    """Open ``connections`` readers; print ``ready`` once all have headers, then the counts."""
    loop = asyncio.get_running_loop()
    request = f"GET {PATH} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n".encode()
    ready = anyio.Event()
    done = anyio.Event()
    state = {"headers": 0, "done": 0}

    def on_headers() -> None:
        state["headers"] += 1
        if state["headers"] == connections:
            ready.set()

    def on_done() -> None:
        state["done"] += 1
        if state["done"] == connections:
            done.set()

    counters: list[_Counter] = []
    for _ in range(connections):
        counter = _Counter(request, on_headers, on_done)
        await loop.create_connection(lambda c=counter: c, "127.0.0.1", port)  # type: ignore[misc]
        counters.append(counter)
    await ready.wait()
    print("ready", flush=True)
    await done.wait()
    seconds = max(c.last for c in counters) - min(c.first for c in counters)
    print(
        json.dumps(
            {
                "events": sum(c.events for c in counters),
                "seconds": seconds,
                "connections": sum(1 for c in counters if c.last),
            }
        ),
        flush=True,
    )


async def _run_clients(port: int, connections: int, on_ready: Callable[[], None]) -> dict[str, Any]:
    command = [sys.executable, __file__, "--client", str(port), "--subscribers", str(connections)]
    async with await anyio.open_process(command, stdin=None, stderr=None) as process:
        assert process.stdout is not None
        lines = BufferedByteReceiveStream(process.stdout)
        line = await lines.receive_until(b"\n", 1024)
        if line != b"ready":
            raise SystemExit(f"client process said {line!r}")
        on_ready()
        result = json.loads(await lines.receive_until(b"\n", 65536))
        await process.wait()
    if result["connections"] != connections:
        raise SystemExit(f"only {result['connections']} of {connections} connections finished")
    return dict(result)


# --- drupe ----------------------------------------------------------------------------------


async def _drupe_run(
    runtime: Any, port: int, chunks: list[dict[str, Any]], args: argparse.Namespace
) -> dict[str, Any]:
    from drupe.streaming.manager import ExecutionSpec, SendInput

    gate = anyio.Event()
    runtime.manager.forget("bench")
    runtime.manager.send(
        SendInput(
            conversation_id="bench",
            executions=[
                ExecutionSpec(model_id="bench", source=lambda: _gated(chunks, args.burst, gate))
            ],
            persistent=False,
        )
    )
    result = await _run_clients(port, args.subscribers, gate.set)
    await runtime.manager.wait_settled("bench")
    return result


# --- baseline: bare coalesced-socket fan-out ------------------------------------------------


class _Connection:
    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.frames: list[bytes] = []
        self.wakeup = anyio.Event()
        self.closed = False

    async def write_loop(self) -> None:
        while True:
            if not self.frames:
                if self.closed:
                    return
                self.wakeup = anyio.Event()
                await self.wakeup.wait()
                continue
            data = b"".join(self.frames)
            self.frames.clear()
            await self.stream.send(b"%x\r\n%s\r\n" % (len(data), data))


async def _baseline_run(chunks: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    import orjson

    from drupe.chunks.sse import DONE_FRAME, encode_sse

    frames = [
        encode_sse(orjson.dumps(chunk), event_id=f"turn/{seq}")
        for seq, chunk in enumerate(chunks, 1)
    ] + [DONE_FRAME]
    connections: list[_Connection] = []
    gate = anyio.Event()
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", backlog=4096)
    port = listener.extra(SocketAttribute.local_port)

    async def handle(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            received = b""
            while b"\r\n\r\n" not in received:
                received += await stream.receive(65536)
            await stream.send(HEAD)
            connection = _Connection(stream)
            connections.append(connection)
            await connection.write_loop()
            await stream.send(b"0\r\n\r\n")

    async def produce() -> None:
        await gate.wait()
        for index, frame in enumerate(frames, 1):
            for connection in connections:
                connection.frames.append(frame)
                connection.wakeup.set()
            if index % args.burst == 0:
                await anyio.lowlevel.checkpoint()
        for connection in connections:
            connection.closed = True
            connection.wakeup.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle, tg)
        tg.start_soon(produce)
        result = await _run_clients(port, args.subscribers, gate.set)
        tg.cancel_scope.cancel()
    await listener.aclose()
    return result


# --- driver ---------------------------------------------------------------------------------


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    import uvicorn

    from drupe.api.app_factory import create_app
    from drupe.app import open_runtime
    from drupe.settings import AuthSettings, Settings
    from drupe.streaming.config import StreamConfig

    deltas = args.deltas or (300 if args.quick else 2_000)
    repeat = args.repeat or (2 if args.quick else 3)
    chunks = _chunks(deltas)
    drupe_rates: list[float] = []
    base_rates: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.toml"
        config.write_text('default_model = "scripted:echo"\n')
        settings = Settings(
            auth=AuthSettings(enabled=False),  # --no-auth: the fan-out is measured
            data_dir=Path(tmp),
            config_path=config,
            stream=StreamConfig(max_listeners=args.subscribers + 10, grace_period=0),
        )
        async with open_runtime(settings) as runtime:
            sock = _listening_socket()
            server = uvicorn.Server(
                uvicorn.Config(
                    create_app(runtime),
                    lifespan="on",  # the app's lifespan owns its SSE ping ticker
                    log_level="warning",
                    http="httptools",
                    backlog=4096,
                    timeout_graceful_shutdown=2,
                )
            )
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: server.serve(sockets=[sock]))
                for _ in range(repeat):
                    base = await _baseline_run(chunks, args)
                    base_rates.append(base["events"] / base["seconds"])
                    drupe = await _drupe_run(runtime, sock.getsockname()[1], chunks, args)
                    drupe_rates.append(drupe["events"] / drupe["seconds"])
                server.should_exit = True
            sock.close()
    events_per_s = median(drupe_rates)
    baseline = median(base_rates)
    return {
        "bench": "http_fanout",
        "subscribers": args.subscribers,
        "deltas": deltas,
        "events_per_subscriber": len(chunks) + 1,
        "burst": args.burst,
        "repeat": repeat,
        "events_per_s": round(events_per_s),
        "baseline_events_per_s": round(baseline),
        "ratio": round(events_per_s / baseline, 3),
        "goal_ratio": GOAL_RATIO,
        "runs_events_per_s": [round(r) for r in drupe_rates],
        "runs_baseline_events_per_s": [round(r) for r in base_rates],
    }


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--subscribers", type=int, default=1_000)
    parser.add_argument("--deltas", type=int, default=None, help="default 2,000 (quick: 300)")
    parser.add_argument("--burst", type=int, default=16, help="chunks per source read")
    parser.add_argument("--repeat", type=int, default=None, help="runs per variant (3; quick 2)")
    parser.add_argument("--client", type=int, default=None, help=argparse.SUPPRESS)


if __name__ == "__main__":
    arguments = parse_args(__doc__.splitlines()[0], _arguments)
    if arguments.client is not None:
        anyio.run(
            _client_main,
            arguments.client,
            arguments.subscribers,
            backend_options={"use_uvloop": True},
        )
    else:
        run(lambda: _main(arguments), arguments)
