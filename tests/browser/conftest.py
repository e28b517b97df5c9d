"""Fixtures for the browser tests: a real ``drupe`` server in a thread and Debian's chromium.

The server is the real app (``create_app_with_lifespan``: runtime, SQLite in a temporary data
dir) on uvicorn, bound to 127.0.0.1 on an ephemeral port, run in a background thread so the
tests can use Playwright's *sync* API in plain test functions (no event loop of theirs is
running, and anyio's plugin is not involved). The default model is the deterministic
``scripted:echo`` paced at ``RATE`` words per second, so an answer is still streaming while a
test acts on it and its final text is known in advance (``You said: <prompt>``).

Chromium is the system one (``/usr/bin/chromium``, installed by ``scripts/test``); Playwright's own
browser download is never used. One browser per package run; one context (fresh storage) per
test. These fixtures never touch the network beyond loopback.
"""

from __future__ import annotations

import shutil
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from playwright.sync_api import (
    Browser,
    BrowserContext,
    Page,
    Playwright,
    expect,
    sync_playwright,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from drupe.api.app_factory import create_app_with_lifespan
from drupe.settings import AuthSettings, Settings

RATE = 15
"""Words per second of the default model: a 30-word prompt answers in about 2 s."""

DEFAULT_MODEL = f"scripted:echo?rate={RATE}"

WAIT_MS = 15_000
"""Timeout of every explicit DOM wait (generous: CI machines are small and busy)."""

expect.set_options(timeout=WAIT_MS)

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        raise RuntimeError(
            "chromium is not installed (apt-get install -y chromium; scripts/test does it)"
        )
    return path


class _StartupSignal:
    """ASGI wrapper that sets ``done`` once the app's lifespan startup finished (or failed)."""

    def __init__(self, app: ASGIApp, done: threading.Event) -> None:
        self.app = app
        self.done = done
        self.failure: str | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def signalling_send(message: Message) -> None:
            await send(message)
            if message["type"] == "lifespan.startup.failed":
                self.failure = str(message.get("message") or "startup failed")
            if message["type"] in ("lifespan.startup.complete", "lifespan.startup.failed"):
                self.done.set()

        await self.app(scope, receive, signalling_send)


@dataclass
class Drupe:
    """A running server: its base URL and a REST client on it."""

    url: str
    api: httpx.Client
    data_dir: Path

    def create_conversation(self, title: str | None = None) -> str:
        response = self.api.post("/api/conversations", json={"title": title})
        response.raise_for_status()
        return str(response.json()["id"])

    def conversation(self, conversation_id: str) -> dict[str, Any]:
        response = self.api.get(f"/api/conversations/{conversation_id}")
        response.raise_for_status()
        return dict(response.json())

    def page_url(self, conversation_id: str) -> str:
        return f"{self.url}/#/c/{conversation_id}"


@contextmanager
def serve(data_dir: Path, config_text: str, *, auth: AuthSettings | None = None) -> Iterator[Drupe]:
    """A real server on ``config_text`` (the TOML of ``config.toml``) until the block ends.

    ``auth`` None: --no-auth on loopback (these pages are under test, not sign-in); the
    sign-in tests pass an ``AuthSettings`` and create their users in the database first.
    """
    config = data_dir / "config.toml"
    config.write_text(config_text)
    auth = auth if auth is not None else AuthSettings(enabled=False)
    settings = Settings(data_dir=data_dir, config_path=config, auth=auth)
    started = threading.Event()
    app = _StartupSignal(create_app_with_lifespan(settings), started)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            app, lifespan="on", log_level="warning", timeout_graceful_shutdown=2, http="httptools"
        )
    )
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="drupe-browser-server", daemon=True
    )
    thread.start()
    try:
        if not started.wait(timeout=30) or app.failure is not None:
            raise RuntimeError(f"the drupe server did not start: {app.failure or 'timeout'}")
        url = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=url, timeout=20) as api:
            yield Drupe(url=url, api=api, data_dir=data_dir)
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


@pytest.fixture(scope="package")
def drupe_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Drupe]:
    with serve(
        tmp_path_factory.mktemp("drupe-browser"), f'default_model = "{DEFAULT_MODEL}"\n'
    ) as drupe:
        yield drupe


@pytest.fixture(scope="package")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="package")
def browser(playwright: Playwright) -> Iterator[Browser]:
    browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
    try:
        yield browser
    finally:
        browser.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(WAIT_MS)
    try:
        yield context
    finally:
        context.close()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()
