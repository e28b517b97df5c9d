"""Identity across cluster nodes (issue 20, step 11): a session made on one node is accepted on
another (sessions live in PostgreSQL); a member's conversation is as hidden on the other node
as on its own; a stop routed to the owner node carries its caller, so another member's stop is
refused; a sign-out on one node is refused on the other within the cache window."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from drupe.api.app_factory import create_app
from drupe.app import Runtime, open_runtime
from drupe.settings import AuthSettings
from tests.cluster.test_status_http import SLOW_MODEL, database_url, node_settings, serve
from tests.gateway.sse import chat_body

pytestmark = [pytest.mark.redis, pytest.mark.postgres]
__all__ = ["database_url"]  # the fixture, re-used

PASSWORDS = {"alice": "alice-password-1", "bob": "bob-password-22"}


async def test_sessions_and_access_hold_on_every_node(
    tmp_path: Path, database_url: str, prefix: str, redis: Any
) -> None:
    async with AsyncExitStack() as stack:
        runtimes: list[Runtime] = []
        for node_id in ("a", "b"):
            settings = replace(
                node_settings(tmp_path, node_id, database_url, prefix), auth=AuthSettings()
            )
            runtimes.append(await stack.enter_async_context(open_runtime(settings)))
        node_a, node_b = runtimes
        for name, password in PASSWORDS.items():
            await node_a.db.users.create(name, password=password)
        http_a = await stack.enter_async_context(serve(create_app(node_a)))
        http_b = await stack.enter_async_context(serve(create_app(node_b)))
        url_a, url_b = str(http_a.base_url), str(http_b.base_url)

        async def login(client: Any, name: str) -> dict[str, str]:
            reply = await client.post(
                "/api/auth/login", json={"username": name, "password": PASSWORDS[name]}
            )
            assert reply.status_code == 200, reply.text
            return {"cookie": f"drupe_session={client.cookies['drupe_session']}"}

        alice = await login(http_a, "alice")  # signed in on node a
        bob = await login(http_a, "bob")
        http_a.cookies.clear()
        # Alice's session works on node b; she starts a live answer there.
        created = await http_b.post(
            "/api/conversations",
            json={"title": "alice's"},
            headers={**alice, "origin": url_b.rstrip("/")},
        )
        assert created.status_code == 201, created.text
        conversation_id = created.json()["id"]
        async with http_b.stream(
            "POST",
            "/api/chat",
            json=chat_body(conversation_id, "go", models=[SLOW_MODEL]),
            headers={**alice, "origin": url_b.rstrip("/")},
        ) as answer:
            assert answer.status_code == 200
            # Bob, on node a: 404 for alice's conversation, and his stop is refused.
            seen = await http_a.get(f"/api/conversations/{conversation_id}", headers=bob)
            assert seen.status_code == 404
            stop = await http_a.post(
                f"/api/chat/{conversation_id}/stop",
                headers={**bob, "origin": url_a.rstrip("/")},
            )
            assert stop.status_code == 404, stop.text
            listed = await http_a.get("/api/conversations", headers=bob)
            assert conversation_id not in listed.text
            # Alice's own stop from node a reaches the owner node (b) with her as the caller.
            mine = await http_a.post(
                f"/api/chat/{conversation_id}/stop",
                headers={**alice, "origin": url_a.rstrip("/")},
            )
            assert mine.status_code == 200, mine.text
        # Sign-out on node a: node b refuses the cookie within its cache window (2 s).
        out = await http_a.post("/api/auth/logout", headers={**alice, "origin": url_a.rstrip("/")})
        assert out.status_code == 204
        statuses = []
        for _ in range(50):  # 10 s at most
            statuses.append((await http_b.get("/api/conversations", headers=alice)).status_code)
            if statuses[-1] == 401:
                break
            await anyio.sleep(0.2)
        assert statuses[-1] == 401, statuses
