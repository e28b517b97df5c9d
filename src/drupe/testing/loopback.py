"""Serve an ASGI app on loopback in a child task: the server under every fake of this kit.

Owns: ``serve_app``: binds ``127.0.0.1`` (an ephemeral port unless given), listens before the
server task starts (so the URL works at once), yields ``http://127.0.0.1:PORT`` and stops the
server when the block is left; an error raised in the block surfaces bare (not in an
``ExceptionGroup``).

Must never: bind anything but loopback, or touch the process's signal handlers.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
import uvicorn

__all__ = ["serve_app"]


class _Server(uvicorn.Server):
    """A uvicorn server that leaves the process's signal handlers alone."""

    @contextmanager
    def capture_signals(self) -> Any:
        yield


def _loopback_socket(port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


@asynccontextmanager
async def serve_app(app: Any, *, port: int = 0) -> AsyncIterator[str]:
    """Serve an ASGI app on 127.0.0.1 in a child task; yields ``http://127.0.0.1:PORT``.

    The socket is bound and listening before the server task starts, so the URL is usable at
    once (early connections wait in the backlog). Leaving the block stops the server.
    """
    sock = _loopback_socket(port)
    bound_port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=2,
        proxy_headers=False,  # as `drupe serve`: the app's ForwardedPeer applies them
    )
    server = _Server(config)
    try:
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(server.serve, [sock])
            try:
                yield f"http://127.0.0.1:{bound_port}"
            finally:
                server.should_exit = True
    except BaseExceptionGroup as group:
        # Let an error raised in the caller's block (or by the server) surface bare, so that
        # `pytest.raises(ModelHTTPError)` around the block works.
        if len(group.exceptions) != 1:
            raise
        raise group.exceptions[0]  # noqa: B904 - the group is only anyio's wrapper
