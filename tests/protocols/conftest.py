"""Fixtures: the gateway tests' real runtime, app and loopback server, and one gateway key.

``http`` talks to the loopback server with ``Authorization: Bearer <key>`` (the protocol
routes take the gateway keys, required by default); ``anonymous`` sends none.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from drupe.app import Runtime
from tests.gateway.conftest import LiveServer, app, runtime, server, settings

__all__ = ["anonymous", "app", "http", "key", "runtime", "server", "settings"]


@pytest.fixture
async def key(runtime: Runtime) -> str:
    secret, _ = await runtime.db.api_keys.create("protocol tests")
    return secret


@pytest.fixture
async def http(server: LiveServer, key: str) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=server.url, timeout=20, headers=headers) as c:
        yield c


@pytest.fixture
async def anonymous(server: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=20) as c:
        yield c
