"""Fixtures: a real runtime (scripted models, SQLite), the app over ASGI, and a real uvicorn.

``server`` runs uvicorn on 127.0.0.1 inside the test's event loop, on a socket bound and
listening before the server starts (so the port is known and connecting never races the
startup). Streaming behaviour (disconnects, resume) is tested against it; plain REST goes
through httpx's ASGI transport.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from drupe.api.app_factory import create_app
from drupe.app import Runtime, open_runtime
from drupe.settings import AuthSettings, Limits, Settings
from drupe.streaming.config import StreamConfig


def make_settings(tmp_path: Path, **overrides: object) -> Settings:
    config = tmp_path / "config.toml"
    config.write_text('default_model = "scripted:echo"\n')
    kwargs: dict[str, object] = {
        "data_dir": tmp_path,
        "config_path": config,
        "limits": Limits(max_body_bytes=64 * 1024, max_message_chars=2000, max_page_size=5),
        "stream": StreamConfig(max_listeners=4),
        # --no-auth on loopback: these suites test the routes, not sign-in (tests/identity).
        "auth": AuthSettings(enabled=False),
    }
    kwargs.update(overrides)
    return Settings(**kwargs)  # type: ignore[arg-type]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path)


@pytest.fixture
async def runtime(settings: Settings) -> AsyncIterator[Runtime]:
    async with open_runtime(settings) as rt:
        yield rt


@pytest.fixture
def app(runtime: Runtime) -> FastAPI:
    return create_app(runtime)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app)
    async with httpx.AsyncClient(transport=transport, base_url="http://drupe.test") as c:
        yield c


@dataclass
class LiveServer:
    url: str
    port: int
    server: uvicorn.Server


@pytest.fixture
async def server(app: FastAPI) -> AsyncIterator[LiveServer]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, lifespan="off", log_level="warning", timeout_graceful_shutdown=2, http="httptools"
    )
    srv = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: srv.serve(sockets=[sock]))
        try:
            yield LiveServer(url=f"http://127.0.0.1:{port}", port=port, server=srv)
        finally:
            srv.should_exit = True
    sock.close()


@pytest.fixture
async def http(server: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=20) as c:
        yield c
