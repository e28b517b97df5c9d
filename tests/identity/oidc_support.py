"""A real OpenID provider (``oidc-provider`` under Node, tests/node/oidc_provider.mjs) and a
Drupe server configured to sign in through it, both on loopback.

``oidc_site(tmp_path, accounts, **oidc)`` starts the provider, writes ``config.toml`` with
``[auth.oidc]`` (the client secret in an environment variable, named by
``client_secret_env``), opens Drupe (users ``root``, ``alice``, ``bob`` as in ``conftest``),
registers Drupe's callback as the client's redirect URI, and yields an ``OidcSite``.
``provider_logout=False`` starts a provider without RP-Initiated Logout (no
``end_session_endpoint``). ``OidcSite.walk(client, login)`` drives a browser's way through the
provider: Drupe's login route, the provider's login and consent pages (its development
interactions accept any login name), up to the callback URL the provider sends the browser back
to (not yet followed).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream

from drupe.api.app_factory import create_app
from drupe.app import Runtime, open_runtime
from drupe.settings import Settings
from drupe.testing.fake_providers import serve_app
from tests.identity.conftest import PASSWORDS

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
CLIENT_ID = "drupe-web"
SECRET_ENV = "DRUPE_TEST_OIDC_SECRET"
_FORM = re.compile(r'<form[^>]*action="([^"]+)"[^>]*method="post"', re.I)
_PROMPT = re.compile(r'name="prompt" value="([a-z]+)"')


@dataclass
class OidcSite:
    url: str
    issuer: str
    runtime: Runtime

    @property
    def callback(self) -> str:
        return f"{self.url}/api/auth/oidc/callback"

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=20)

    async def walk(self, client: httpx.AsyncClient, login: str) -> str:
        """From Drupe's login route through the provider's pages: the callback URL."""
        reply = await client.get(f"{self.url}/api/auth/oidc/login")
        assert reply.status_code == 302, reply.text
        for _ in range(16):
            if reply.is_redirect:
                target = str(reply.url.join(reply.headers["location"]))
                if target.startswith(self.callback):
                    return target
                reply = await client.get(target)
                continue
            assert reply.status_code == 200, reply.text
            action, prompt = _FORM.search(reply.text), _PROMPT.search(reply.text)
            assert action is not None and prompt is not None, reply.text
            form = {"prompt": prompt.group(1)}
            if prompt.group(1) == "login":
                form |= {"login": login, "password": "anything"}
            reply = await client.post(str(reply.url.join(action.group(1))), data=form)
        raise AssertionError("the provider never sent the browser back to Drupe")


async def _line(stream: TextReceiveStream) -> dict[str, Any]:
    buffer = ""
    async for chunk in stream:
        buffer += chunk
        if "\n" in buffer:
            break
    line, _, _ = buffer.partition("\n")
    out: dict[str, Any] = json.loads(line)
    return out


@asynccontextmanager
async def _provider(log: Path) -> AsyncIterator[tuple[Process, str]]:
    node, npm = shutil.which("node"), shutil.which("npm")
    assert node is not None and npm is not None, "this test needs node and npm on PATH"
    if not (NODE_DIR / "node_modules" / "oidc-provider" / "package.json").exists():
        await anyio.run_process([npm, "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR)
    with log.open("wb") as stderr:
        script = str(NODE_DIR / "oidc_provider.mjs")
        process = await anyio.open_process([node, script], stderr=stderr)
    try:
        assert process.stdout is not None
        with anyio.fail_after(20):
            first = await _line(TextReceiveStream(process.stdout))
        yield process, str(first["issuer"])
    finally:
        if process.returncode is None:
            process.terminate()
        with anyio.move_on_after(5, shield=True):
            await process.wait()


def _toml(value: object) -> str:
    return json.dumps(value)  # a JSON string or list of strings is TOML too


@asynccontextmanager
async def oidc_site(
    tmp_path: Path,
    accounts: Mapping[str, Mapping[str, object]],
    issuer_of: Callable[[str], str] = str,
    *,
    provider_logout: bool = True,
    **oidc: object,
) -> AsyncIterator[OidcSite]:
    secret = "s3cret-" + os.urandom(8).hex()
    os.environ[SECRET_ENV] = secret
    try:
        async with _provider(tmp_path / "oidc-provider.log") as (process, issuer):
            table = {
                "issuer": issuer_of(issuer),
                "client_id": CLIENT_ID,
                "client_secret_env": SECRET_ENV,
                **oidc,
            }
            config = tmp_path / "config.toml"
            config.write_text(
                'default_model = "scripted:echo"\n\n[auth.oidc]\n'
                + "".join(f"{key} = {_toml(value)}\n" for key, value in table.items())
            )
            async with open_runtime(Settings(data_dir=tmp_path, config_path=config)) as runtime:
                await runtime.db.users.create("root", password=PASSWORDS["root"], role="admin")
                await runtime.db.users.create("alice", password=PASSWORDS["alice"])
                async with serve_app(create_app(runtime)) as url:
                    client = {
                        "client_id": CLIENT_ID,
                        "client_secret": secret,
                        "redirect_uris": [f"{url}/api/auth/oidc/callback"],
                        "post_logout_redirect_uris": [f"{url}/api/auth/oidc/signed-out"],
                    }
                    assert process.stdin is not None and process.stdout is not None
                    setup = {"clients": [client], "accounts": accounts, "logout": provider_logout}
                    line = json.dumps(setup) + "\n"
                    await process.stdin.send(line.encode())
                    with anyio.fail_after(20):
                        assert await _line(TextReceiveStream(process.stdout)) == {"ready": True}
                    yield OidcSite(url, issuer, runtime)
    finally:
        os.environ.pop(SECRET_ENV, None)
