"""One ``drupe serve`` server: the listening socket and uvicorn on it.

``listen(settings)`` binds the socket in the calling process (so ``--port 0`` is resolved once
and every worker of ``--workers N`` shares the one socket) and returns it with the URL to show.
``run_server(settings, sock, on_started)`` runs ``settings.server`` (uvicorn, or granian:
``drupe.cli.granian_server``, which closes ``sock`` and binds its port itself) with the app on
that socket until a
signal stops it (SIGINT or SIGTERM: a graceful shutdown, live answers persisted by the runtime's
own shutdown); ``on_started`` is called once the app has started and the socket accepts
requests. It returns whether the server started. ``OSError`` from ``listen`` says why the
address cannot be used.
"""

from __future__ import annotations

import gc
import socket
from collections.abc import Callable

from drupe.settings import Settings

__all__ = ["listen", "run_server"]


def listen(settings: Settings) -> tuple[socket.socket, str]:
    """The bound, listening socket for ``settings.host:port`` and its ``http://`` URL."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((settings.host, settings.port))
    except OSError:
        sock.close()
        raise
    sock.listen(2048)
    bound_port = sock.getsockname()[1]
    shown_host = settings.host if settings.host not in ("0.0.0.0", "::") else "127.0.0.1"
    if ":" in shown_host:
        shown_host = f"[{shown_host}]"
    return sock, f"http://{shown_host}:{bound_port}"


def run_server(
    settings: Settings, sock: socket.socket, on_started: Callable[[], None] | None = None
) -> bool:
    """uvicorn with the app on ``sock`` until a signal stops it; True when it had started."""
    if settings.server == "granian":
        return _run_granian(settings, sock, on_started)
    import uvicorn

    from drupe.api.app_factory import create_app_with_lifespan

    # Spans go to <data dir>/traces and, with OTEL_EXPORTER_OTLP_ENDPOINT, to OTLP (app.py).
    # Thousands of live streams make many small objects; a lazier collector halves its share.
    gc.set_threshold(20_000, 50, 100)
    # Boot creates ~120,000 long-lived objects (modules, classes, routes, tables): automatic
    # collection would run ~300 times over them (~0.15 s CPU). It is paused until the server
    # listens (or fails to start).
    gc.disable()
    try:
        app_ = create_app_with_lifespan(settings)

        class AnnouncingServer(uvicorn.Server):
            """Calls ``on_started`` once the app has started and the socket accepts requests."""

            async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                try:
                    await super().startup(sockets)
                finally:
                    gc.enable()
                if self.started and on_started is not None:
                    on_started()

        server = AnnouncingServer(
            uvicorn.Config(
                app_,
                log_level="info",
                timeout_graceful_shutdown=5,
                ws="websockets-sansio",
                proxy_headers=False,  # the app's ForwardedPeer applies them (drupe.http.peer)
            )
        )
        server.run(sockets=[sock])
    finally:
        gc.enable()
    return bool(server.started)


def _run_granian(
    settings: Settings, sock: socket.socket, on_started: Callable[[], None] | None
) -> bool:
    from drupe.api.app_factory import create_app_with_lifespan
    from drupe.cli.granian_server import run_granian

    gc.set_threshold(20_000, 50, 100)
    gc.disable()  # as for uvicorn: paused over boot, until the app has started

    def started() -> None:
        gc.enable()
        if on_started is not None:
            on_started()

    try:
        app_ = create_app_with_lifespan(settings)
        port = sock.getsockname()[1]
        sock.close()  # granian binds the (resolved) port itself
        return run_granian(app_, settings.host, port, started)
    finally:
        gc.enable()
