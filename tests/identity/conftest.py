"""A real Drupe server on loopback with auth on (the default), and three users.

``server`` yields a ``Site``: its URL, the runtime, and signed-in ``httpx`` clients for
``alice`` and ``bob`` (members) and ``root`` (admin), each with its own cookie jar and the
Origin a browser would send; ``anon`` presents nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from drupe.api.app_factory import create_app
from drupe.app import Runtime, open_runtime
from drupe.settings import Settings
from drupe.testing.loopback import serve_app

PASSWORDS = {"alice": "alice-password-1", "bob": "bob-password-22", "root": "root-password-333"}


@dataclass
class Site:
    url: str
    runtime: Runtime
    clients: dict[str, httpx.AsyncClient] = field(default_factory=dict)

    def client(self, **kwargs: object) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, timeout=20, **kwargs)  # type: ignore[arg-type]

    async def sign_in(self, name: str) -> httpx.AsyncClient:
        client = self.client(headers={"origin": self.url})
        reply = await client.post(
            "/api/auth/login", json={"username": name, "password": PASSWORDS[name]}
        )
        assert reply.status_code == 200, reply.text
        self.clients[name] = client
        return client


def auth_settings(tmp_path: Path) -> Settings:
    config = tmp_path / "config.toml"
    config.write_text('default_model = "scripted:echo"\n')
    return Settings(data_dir=tmp_path, config_path=config)  # auth on: the default


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[Site]:
    async with open_runtime(auth_settings(tmp_path)) as runtime:
        await runtime.db.users.create("root", password=PASSWORDS["root"], role="admin")
        await runtime.db.users.create("alice", password=PASSWORDS["alice"])
        await runtime.db.users.create("bob", password=PASSWORDS["bob"])
        async with serve_app(create_app(runtime)) as url:
            site = Site(url, runtime)
            try:
                yield site
            finally:
                for client in site.clients.values():
                    await client.aclose()
