"""``serving(app, server)``: an ASGI app on uvicorn or granian in the test's event loop.

Yields the base URL once the server accepts connections; leaving stops it. granian runs its
embedded server (its ASGI interface, the app's lifespan on, as ``drupe serve --server
granian``); uvicorn runs with httptools and the lifespan on, as ``drupe serve``.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import uvicorn

from drupe.settings import SERVERS

__all__ = ["SERVERS", "serving"]


@asynccontextmanager
async def serving(app: Any, server: str) -> AsyncIterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    async with anyio.create_task_group() as tg:
        if server == "granian":
            from granian.constants import Interfaces
            from granian.log import LogLevels
            from granian.server.embed import Server

            sock.close()  # granian binds the port itself
            embedded = Server(
                app, port=port, interface=Interfaces.ASGI, log_level=LogLevels.warning
            )
            tg.start_soon(embedded.serve)
            stop = embedded.stop
        else:
            sock.listen(128)
            config = uvicorn.Config(
                app, lifespan="on", log_level="warning", timeout_graceful_shutdown=2
            )
            srv = uvicorn.Server(config)
            tg.start_soon(lambda: srv.serve(sockets=[sock]))

            def stop() -> None:
                srv.should_exit = True

        try:
            with anyio.fail_after(10):
                while True:
                    try:
                        await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                        break
                    except OSError:
                        await anyio.sleep(0.02)
            yield f"http://127.0.0.1:{port}"
        finally:
            stop()
    sock.close()
