"""The agent gateway in cluster mode: a turn for an agent session whose lease another node holds
is admitted on that node (the one with the session's driver) and streamed back to the client of
the node the request reached, from the chunk log.

Two real runtimes on one PostgreSQL database and one Redis prefix; the official ``openai``
client on node B; node A holds the session's lease (as it does during a turn's grace period).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import openai
import pytest
from redis.asyncio import Redis

from drupe.agent.models.scripted import lorem
from drupe.api.app_factory import create_app
from drupe.persistence.agents import session_conversation_id
from drupe.persistence.records import KeyScopes
from drupe.testing.loopback import serve_app
from tests.cluster.nodes import Node, cluster_nodes

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

WORDS = 40
MODEL = f"scripted:lorem?words={WORDS}&rate=200"


@pytest.fixture
async def nodes(tmp_path: Path, prefix: str) -> AsyncIterator[list[Node]]:
    async with cluster_nodes(tmp_path, prefix, lease_ttl=3.0) as pair:
        yield pair


async def test_a_session_held_by_another_node_answers_through_this_one(
    nodes: list[Node], tmp_path: Path
) -> None:
    a, b = nodes
    workspace = tmp_path / "ws"
    workspace.mkdir()
    agents = b.runtime.db.agents
    agent = await agents.create_agent(
        name="writer", driver_type="inprocess", model_id=MODEL, workspace=str(workspace)
    )
    session = await agents.create_session(agent.id, title="t", settings={})
    conversation = session_conversation_id(session.id)
    key, _ = await b.runtime.db.api_keys.create("cluster gateway")
    cluster_a, cluster_b = a.takeover, b.takeover
    text: list[str] = []
    async with cluster_a.ownership.hold(conversation):  # A owns the session meanwhile
        client = openai.AsyncOpenAI(base_url=f"{b.url}/v1", api_key=key, max_retries=0, timeout=20)
        with anyio.fail_after(30):
            stream = await client.chat.completions.create(
                model=f"agent-session:{session.id}",
                messages=[{"role": "user", "content": "write"}],
                stream=True,
            )
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    text.append(chunk.choices[0].delta.content)
        await client.close()
        with anyio.fail_after(10):
            await a.runtime.manager.wait_settled(conversation)
    assert "".join(text) == lorem(WORDS)
    # The turn ran on A, the lease holder; B only relayed it.
    assert cluster_b.ownership.fence_for(conversation) is None
    rows = await b.runtime.db.messages.list_for_conversation(conversation)
    answer = [r for r in rows if r.role == "assistant"][-1]
    assert answer.status == "success"
    assert answer.fence == cluster_a.ownership.fence_for(conversation)
    stored = "".join(p.get("text", "") for p in answer.parts if p["type"] == "text")
    assert stored == lorem(WORDS)


async def test_a_keys_requests_per_minute_hold_across_the_nodes(nodes: list[Node]) -> None:
    a, b = nodes
    key, _ = await a.runtime.db.api_keys.create("budgeted", KeyScopes(requests_per_minute=2))
    body = {"model": "scripted:echo", "messages": [{"role": "user", "content": "hi"}]}
    codes = []
    for node in (a, b, a, b):
        client = openai.AsyncOpenAI(base_url=f"{node.url}/v1", api_key=key, max_retries=0)
        try:
            await client.chat.completions.create(**body)  # type: ignore[call-overload]
            codes.append(200)
        except openai.RateLimitError as err:
            codes.append(err.status_code)
            assert "2 requests per minute" in err.message
        finally:
            await client.close()
    # One window for the cluster: before, each node allowed 2 (4 in all).
    assert codes == [200, 200, 429, 429]


async def test_the_apps_shutdown_closes_the_shared_windows_connections(
    nodes: list[Node], prefix: str, redis: Redis
) -> None:
    """The gateway-key window's Redis pool is the app's: closed by its lifespan's end (the
    sign-in window's, with auth on, in ``test_login_limiter``)."""

    async def named() -> int:
        return sum(c.get("name") == f"{prefix}:gateway:window" for c in await redis.client_list())

    runtime = nodes[0].runtime
    key, _ = await runtime.db.api_keys.create("windowed", KeyScopes(requests_per_minute=5))
    app = create_app(runtime)  # a second app on node A's runtime, its lifespan run as a server's
    async with app.router.lifespan_context(app), serve_app(app) as url:
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)
        try:
            await client.chat.completions.create(
                model="scripted:echo", messages=[{"role": "user", "content": "hi"}]
            )
        finally:
            await client.close()
        assert await named() == 1  # this app's window (the nodes' own apps served no /v1)
    for _ in range(100):  # Redis drops a closed connection from its list at once, or nearly
        if not await named():
            break
        await anyio.sleep(0.05)
    else:
        pytest.fail("the window's connection is still open after the app's shutdown")
