"""The ASGI server under a bench's app: uvicorn or granian, in the bench's own event loop.

``serving(app, server)`` is an async context manager that serves ``app`` on 127.0.0.1 (a free
port) with ``server`` (``uvicorn``: httptools, as ``drupe serve`` runs it; ``granian``: its
embedded server, one Rust runtime thread, the app's lifespan on) and yields the port once the
server accepts requests; leaving it stops the server gracefully.

``bare_sse_app(source, on_chunk, stop)`` is the bare pipe as an ASGI app (issue 24 §1, the floor
of each server): no framework, no manager, no listener; each ``GET .../live-<n>/stream`` runs
the stream's source in the request's own coroutine, each chunk one SSE frame (orjson, ``id:``
cursor) sent with ``more_body``, then ``[DONE]``.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import orjson

__all__ = ["SERVERS", "bare_sse_app", "serving"]

SERVERS = ("uvicorn", "granian")
_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-vercel-ai-ui-message-stream", b"v1"),
    (b"x-accel-buffering", b"no"),
]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def serving(app: Any, server: str) -> AsyncIterator[int]:
    """Serve ``app`` with ``server`` on a free loopback port; yield the port."""
    if server == "granian":
        async with _granian(app) as port:
            yield port
        return
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(4096)
    uv = uvicorn.Server(
        uvicorn.Config(
            app,
            lifespan="on",
            log_level="warning",
            http="httptools",
            timeout_graceful_shutdown=5,
            backlog=4096,
        )
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: uv.serve(sockets=[sock]))
        while not uv.started:  # noqa: ASYNC110 (uvicorn sets a flag, no event)
            await anyio.sleep(0.01)
        try:
            yield sock.getsockname()[1]
        finally:
            uv.should_exit = True
    sock.close()


@asynccontextmanager
async def _granian(app: Any) -> AsyncIterator[int]:
    from granian.constants import Interfaces
    from granian.log import LogLevels
    from granian.server.embed import Server

    port = _free_port()
    server = Server(
        app,
        address="127.0.0.1",
        port=port,
        interface=Interfaces.ASGI,
        backlog=4096,
        log_level=LogLevels.warning,
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        await _until_accepting(port)
        try:
            yield port
        finally:
            server.stop()


async def _until_accepting(port: int) -> None:
    for _ in range(1000):
        try:
            stream = await anyio.connect_tcp("127.0.0.1", port)
        except OSError:
            await anyio.sleep(0.01)
            continue
        await stream.aclose()
        return
    raise RuntimeError(f"no server on port {port}")


def bare_sse_app(
    source: Callable[[int], AsyncIterator[dict[str, Any]]],
    on_chunk: Callable[[], None],
) -> Any:
    """The bare pipe as an ASGI app: the source's chunks as SSE frames, one send each."""
    from drupe.chunks.sse import DONE_FRAME, encode_sse

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        index = int(scope["path"].split("/")[3].split("-")[1])
        await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
        seq = 0
        async for chunk in source(index):
            seq += 1
            on_chunk()
            frame = encode_sse(orjson.dumps(chunk), event_id=f"turn/{seq}")
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": DONE_FRAME, "more_body": False})

    return app
