"""``drupe serve --server granian``: the app on granian's embedded server, in this process.

``run_granian(app, host, port, on_started)`` serves the ASGI ``app`` with granian (the Rust
HTTP server; its ASGI interface, one runtime thread, the app's lifespan on) on ``host:port``
until SIGINT or SIGTERM, under uvloop, and returns whether the app had started (False when
its lifespan startup failed: granian has logged the error). ``on_started`` is called once the
app's lifespan startup has completed (granian's socket is already listening then: requests
wait in its backlog until the worker serves, right after).

Differences from uvicorn (docs/deploy.md): granian binds the port itself (it takes no
pre-bound socket), so the caller closes its own socket on the resolved port first; one process
only (``--workers`` stays on uvicorn); a signal stops the server at once and the app's lifespan
shutdown (which persists live answers) runs without uvicorn's wait for open responses.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import Any

__all__ = ["run_granian"]

_STDERR = {"class": "logging.StreamHandler", "stream": "ext://sys.stderr"}
_STDERR_HANDLERS = {
    "console": {"formatter": "generic", **_STDERR},
    "access": {"formatter": "access", **_STDERR},
}


def run_granian(
    app: Any, host: str, port: int, on_started: Callable[[], None] | None = None
) -> bool:
    """granian with ``app`` on ``host:port`` until a signal stops it; True when it had started."""
    import anyio
    from granian.constants import Interfaces
    from granian.errors import FatalError
    from granian.log import LogLevels
    from granian.server.embed import Server

    started = False

    async def announcing(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await app(scope, receive, send)
            return

        async def watched_send(message: Any) -> None:
            nonlocal started
            await send(message)
            if message["type"] == "lifespan.startup.complete":
                started = True
                if on_started is not None:
                    on_started()

        await app(scope, receive, watched_send)

    async def main() -> None:
        server = Server(
            announcing,
            address=host,
            port=port,
            interface=Interfaces.ASGI,
            backlog=2048,
            log_level=LogLevels.info,
            log_dictconfig={"handlers": _STDERR_HANDLERS},  # stdout is the CLI's (as uvicorn)
        )
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, server.stop)
        await server.serve()

    try:
        anyio.run(main, backend_options={"use_uvloop": True})
    except FatalError:  # granian logged the app's startup error (with its traceback) already
        return False
    return started
