"""``live_streams.py --http``: live streams measured through real sockets (issue 11 §2).

Two server variants, each run in a fresh child process so the RSS it reports is its own:

* ``http``: the real app (``create_app`` over an open runtime, the same object ``drupe serve``
  runs, with the server's ``gc.set_threshold``) on uvicorn (httptools, uvloop) on loopback. The
  streams are started through the streaming layer's own API (``StreamManager.send``, not
  persisted), each with a trickling chunk source; every stream has ONE subscriber: its own TCP
  connection doing ``GET /api/chat/{id}/stream`` (the AI SDK resume route: ``SseListener``,
  ``SseResponse``, coalesced writes).
* ``http-bare``: the bare pipe over the same sockets: a raw asyncio protocol server answering
  each request with the same headers, whose stream is a task running the same source, encoding
  each chunk as the same SSE frame (orjson, ``id:`` cursor, chunked transfer encoding) into a
  memory stream that the connection's writer task drains (one ``receive``, then
  ``receive_nowait`` until empty, one ``transport.write`` per wake-up). No framework, no
  manager, no listener: two tasks and a memory stream per stream, as in-process.

The clients live in a third process (``--client``): raw asyncio protocols that only count
``\\n\\n`` frame ends, so neither server's RSS nor CPU includes them (they do share the cores).
Sources wait on a gate that opens once every connection has its response headers.

Figures of one variant: ``rss_per_stream_kib`` = (VmRSS once the streams published ``--chunks``
chunks each on average - VmRSS of the serving process before any stream or connection) /
streams; ``chunks_per_s`` and ``chunks_per_cpu_s`` over the window from 5 to ``--chunks``
chunks per stream (CPU: the server process's, every thread); ``keeps_up_ratio`` = chunks per
second / the ``streams / interval`` asked; ``frames_received`` by the clients.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import orjson
from anyio.streams.buffered import BufferedByteReceiveStream

from _asgi_servers import bare_sse_app, serving
from _common import rss_kib, token_deltas

__all__ = ["client_main", "raise_open_files", "serve"]

_MAX_DELTAS = 100_000
_STAGGER = 100
_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"connection: keep-alive\r\nx-vercel-ai-ui-message-stream: v1\r\nx-accel-buffering: no\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)


def raise_open_files(needed: int) -> None:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; fail clearly when it is too low."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise SystemExit(f"{needed} file descriptors needed, the hard limit is {hard}")
    if soft != resource.RLIM_INFINITY and soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class _Stop:
    """The gate the sources wait on, and the flag that ends them (bare variant)."""

    def __init__(self) -> None:
        self.gate = anyio.Event()
        self.stopped = False
        self.chunks = 0


async def _source(index: int, interval: float, stop: _Stop) -> AsyncIterator[dict[str, Any]]:
    await stop.gate.wait()
    await anyio.sleep(interval * (index % _STAGGER) / _STAGGER)
    yield {"type": "start", "messageId": f"msg_{index}"}
    yield {"type": "start-step"}
    yield {"type": "text-start", "id": "t1"}
    for n in range(_MAX_DELTAS):
        await anyio.sleep(interval)
        if stop.stopped:
            return
        yield {"type": "text-delta", "id": "t1", "delta": token_deltas(1, offset=n + index)[0]}


# --- clients (separate process) ---------------------------------------------------------


class _Reader(asyncio.Protocol):
    """One subscriber connection: counts frame ends until the response's last chunk."""

    def __init__(self, request: bytes, on_headers: Callable[[], None], on_done: Callable[[], None]):
        self.request = request
        self.on_headers = on_headers
        self.on_done = on_done
        self.headers_seen = False
        self.head = b""
        self.frames = 0
        self.finished = False
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
        self.frames += data.count(b"\n\n")
        if b"data: [DONE]" in data or data.endswith(b"0\r\n\r\n"):
            self._finish()

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish()

    def _finish(self) -> None:
        if not self.finished:
            self.finished = True
            if self.transport is not None:
                self.transport.close()
            self.on_done()


async def client_main(port: int, streams: int) -> None:
    """Open ``streams`` connections, print ``ready`` once all have headers, then the totals."""
    raise_open_files(streams + 64)
    loop = asyncio.get_running_loop()
    ready = anyio.Event()
    done = anyio.Event()
    state = {"headers": 0, "done": 0}

    def on_headers() -> None:
        state["headers"] += 1
        if state["headers"] == streams:
            ready.set()

    def on_done() -> None:
        state["done"] += 1
        if state["done"] == streams:
            done.set()

    readers = []
    limit = anyio.Semaphore(256)

    async def connect(index: int) -> None:
        request = f"GET /api/chat/live-{index}/stream HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"
        reader = _Reader(request.encode(), on_headers, on_done)
        readers.append(reader)
        async with limit:
            await loop.create_connection(lambda: reader, "127.0.0.1", port)

    async with anyio.create_task_group() as tg:
        for index in range(streams):
            tg.start_soon(connect, index)
    await ready.wait()
    print("ready", flush=True)
    await done.wait()
    print(json.dumps({"frames": sum(r.frames for r in readers)}), flush=True)


async def _run_client(port: int, streams: int) -> tuple[Any, BufferedByteReceiveStream]:
    command = [sys.executable, sys.argv[0], "--client", str(port), "--streams", str(streams)]
    process = await anyio.open_process(command, stdin=None, stderr=None)
    assert process.stdout is not None
    lines = BufferedByteReceiveStream(process.stdout)
    line = await lines.receive_until(b"\n", 1024)
    if line != b"ready":
        raise SystemExit(f"client process said {line!r}")
    return process, lines


# --- servers ----------------------------------------------------------------------------


def _listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(4096)
    return sock


async def _window(
    args: argparse.Namespace,
    streams: int,
    total: Callable[[], int],
) -> tuple[tuple[float, float, int], tuple[float, float, int], bool]:
    """Wait from 5 to ``--chunks`` chunks per stream; (wall, cpu, chunks) at both ends."""
    deadline = time.monotonic() + args.timeout

    async def reach(target: int) -> bool:
        while total() < target:
            if time.monotonic() > deadline:
                return False
            await anyio.sleep(0.05)
        return True

    warm = await reach(streams * min(5, args.chunks))
    start = (time.perf_counter(), time.process_time(), total())
    reached = warm and await reach(streams * args.chunks)
    end = (time.perf_counter(), time.process_time(), total())
    return start, end, reached


def _figures(
    variant: str,
    streams: int,
    interval: float,
    rss_before: int,
    rss_live: int,
    window: tuple[tuple[float, float, int], tuple[float, float, int], bool],
    frames: int,
    published: int,
) -> dict[str, Any]:
    start, end, reached = window
    wall = end[0] - start[0]
    cpu = end[1] - start[1]
    chunks = end[2] - start[2]
    chunks_per_s = chunks / wall if wall > 0 else 0.0
    expected = streams / interval
    per_stream = (rss_live - rss_before) / streams
    print(
        f"{variant}: {streams} streams over HTTP; server RSS {rss_before / 1024:.1f} MiB before,"
        f" {rss_live / 1024:.1f} MiB live: {per_stream:.2f} KiB per stream"
    )
    print(
        f"{variant}: {chunks_per_s:,.0f} chunks/s of {expected:,.0f} asked"
        f" ({chunks_per_s / expected:.2f}); server CPU {cpu / wall if wall else 0:.0%} of one"
        f" core, {chunks / cpu if cpu > 0 else 0:,.0f} chunks per CPU second; the clients"
        f" received {frames:,} frames of {published:,} chunks published"
    )
    if not reached:
        print(f"WARNING: {variant}: the streams did not reach the target in time")
    return {
        "variant": variant,
        "streams": streams,
        "rss_before_kib": rss_before,
        "rss_live_kib": rss_live,
        "rss_per_stream_kib": round(per_stream, 2),
        "chunks_per_s": round(chunks_per_s),
        "expected_chunks_per_s": round(expected),
        "keeps_up_ratio": round(chunks_per_s / expected, 3),
        "cpu_share_of_one_core": round(cpu / wall, 3) if wall else None,
        "chunks_per_cpu_s": round(chunks / cpu) if cpu > 0 else None,
        "frames_received": frames,
        "chunks_published": published,
        "reached_target": reached,
    }


async def _serve_drupe(args: argparse.Namespace, streams: int) -> dict[str, Any]:
    from drupe.api.app_factory import create_app
    from drupe.app import open_runtime
    from drupe.settings import AuthSettings, Settings
    from drupe.streaming.config import StreamConfig
    from drupe.streaming.manager import ExecutionSpec, SendInput

    interval: float = args.interval
    stop = _Stop()
    gc.set_threshold(20_000, 50, 100)  # what `drupe serve` sets (cli/main.py)
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
            manager = runtime.manager
            async with serving(create_app(runtime), args.server) as port:
                rss_before = rss_kib()
                base = manager.chunks_total
                for index in range(streams):

                    def source(index: int = index) -> AsyncIterator[dict[str, Any]]:
                        return _source(index, interval, stop)

                    manager.send(
                        SendInput(
                            conversation_id=f"live-{index}",
                            executions=[ExecutionSpec(model_id="bench", source=source)],
                            persistent=False,
                        )
                    )
                process, lines = await _run_client(port, streams)
                stop.gate.set()
                window = await _window(args, streams, lambda: manager.chunks_total - base)
                rss_live = rss_kib()
                live = manager.statistics()["live_streams"]
                await manager.shutdown()
                published = manager.chunks_total - base
                result = json.loads(await lines.receive_until(b"\n", 1 << 20))
                await process.wait()
    figures = _figures(
        f"http-{args.server}",
        streams,
        interval,
        rss_before,
        rss_live,
        window,
        result["frames"],
        published,
    )
    figures["live_streams"] = live
    return figures


async def _serve_bare_asgi(args: argparse.Namespace, streams: int) -> dict[str, Any]:
    """The bare pipe as a plain ASGI app on ``--server``: that server's own floor."""
    stop = _Stop()
    gc.set_threshold(20_000, 50, 100)

    def counted() -> None:
        stop.chunks += 1

    app = bare_sse_app(lambda index: _source(index, args.interval, stop), counted)
    async with serving(app, args.server) as port:
        rss_before = rss_kib()
        process, lines = await _run_client(port, streams)
        stop.gate.set()
        window = await _window(args, streams, lambda: stop.chunks)
        rss_live = rss_kib()
        stop.stopped = True
        result = json.loads(await lines.receive_until(b"\n", 1 << 20))
        await process.wait()
    figures = _figures(
        f"http-asgi-{args.server}",
        streams,
        args.interval,
        rss_before,
        rss_live,
        window,
        result["frames"],
        stop.chunks,
    )
    figures["live_streams"] = streams
    return figures


class _BareConnection(asyncio.Protocol):
    """One connection of the bare server: on the request, start its stream's two tasks."""

    def __init__(self, start: Callable[[int, asyncio.Transport], None]) -> None:
        self.start = start
        self.received = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.transport is None:
            return
        self.received += data
        if b"\r\n\r\n" in self.received:
            index = int(self.received.split(b" ", 2)[1].split(b"/")[3].split(b"-")[1])
            self.received = b""
            self.start(index, self.transport)
            self.transport = None


async def _serve_bare(args: argparse.Namespace, streams: int) -> dict[str, Any]:
    from drupe.chunks.sse import DONE_FRAME, encode_sse

    interval: float = args.interval
    stop = _Stop()
    gc.set_threshold(20_000, 50, 100)

    async def produce(index: int, send: Any) -> None:
        seq = 0
        with send:
            async for chunk in _source(index, interval, stop):
                seq += 1
                stop.chunks += 1
                frame = encode_sse(orjson.dumps(chunk), event_id=f"turn/{seq}")
                send.send_nowait(b"%x\r\n%s\r\n" % (len(frame), frame))
            send.send_nowait(b"%x\r\n%s\r\n0\r\n\r\n" % (len(DONE_FRAME), DONE_FRAME))

    async def write(transport: asyncio.Transport, receive: Any) -> None:
        # The coalescing writer: one receive, then everything queued, as one write.
        transport.write(_HEAD)
        with receive:
            while True:
                try:
                    data = await receive.receive()
                except anyio.EndOfStream:
                    break
                batch = [data]
                while True:
                    try:
                        batch.append(receive.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                transport.write(b"".join(batch) if len(batch) > 1 else data)
        transport.close()

    loop = asyncio.get_running_loop()
    sock = _listening_socket()
    async with anyio.create_task_group() as tg:

        def start(index: int, transport: asyncio.Transport) -> None:
            send, receive = anyio.create_memory_object_stream[bytes](1024)
            tg.start_soon(produce, index, send)
            tg.start_soon(write, transport, receive)

        server = await loop.create_server(lambda: _BareConnection(start), sock=sock)
        rss_before = rss_kib()
        process, lines = await _run_client(sock.getsockname()[1], streams)
        stop.gate.set()
        window = await _window(args, streams, lambda: stop.chunks)
        rss_live = rss_kib()
        stop.stopped = True
        result = json.loads(await lines.receive_until(b"\n", 1 << 20))
        await process.wait()
        server.close()
    figures = _figures(
        "http-bare",
        streams,
        interval,
        rss_before,
        rss_live,
        window,
        result["frames"],
        stop.chunks,
    )
    figures["live_streams"] = streams
    return figures


async def serve(args: argparse.Namespace, streams: int, variant: str) -> dict[str, Any]:
    """Run one server variant (``http`` or ``http-bare``) with its client process."""
    raise_open_files(streams + 256)
    if variant == "http":
        return await _serve_drupe(args, streams)
    if variant == "http-asgi":
        return await _serve_bare_asgi(args, streams)
    return await _serve_bare(args, streams)
