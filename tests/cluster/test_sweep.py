"""The takeover sweep's decision: when an orphaned conversation is taken over.

Real nodes (one PostgreSQL database, one Redis prefix); the orphans are written into Redis as a
node that died would leave them, and the sweep's clock is driven by the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import orjson
import pytest

from drupe.cluster.log_writer import live_key
from drupe.cluster.takeover import NODE_LOST
from tests.cluster.nodes import Node, cluster_nodes

pytestmark = [pytest.mark.redis, pytest.mark.postgres]


@pytest.fixture
async def node(tmp_path: Path, prefix: str) -> AsyncIterator[Node]:
    async with cluster_nodes(tmp_path, prefix, count=1, lease_ttl=5.0) as (only,):
        yield only


async def _orphan(node: Node, conversation_id: str, owner: str) -> str:
    """A live turn left by ``owner``: its live entry and a log with one batch, no lease."""
    cluster = node.cluster
    key = cluster.log.key(conversation_id, "turn-1")
    await cluster.log.append(key, "exec-1", [{"type": "text-delta", "id": "t", "delta": "hi"}], [3])
    payload = orjson.dumps({"node": owner, "turn": "turn-1", "key": key})
    await cluster.redis.hset(live_key(cluster.prefix), conversation_id, payload)
    return key


async def test_an_orphan_of_a_dead_node_is_taken_over_at_once_and_its_log_ended(
    node: Node,
) -> None:
    chat, cluster = node.takeover, node.cluster
    now = [100.0]
    chat.clock = lambda: now[0]
    key = await _orphan(node, "o1", "ghost")  # no heartbeat: the node is gone
    assert await chat.sweep() == 1
    entries = await cluster.log.read(key)
    ends = [e for e in entries if e.terminal is not None]
    assert {e.execution_id for e in ends} == {"exec-1", ""}
    assert all(e.terminal == "error" and e.done for e in ends)
    assert all(e.error == {"name": "NodeLost", "message": NODE_LOST} for e in ends)
    assert not await cluster.redis.hexists(live_key(cluster.prefix), "o1")
    assert await cluster.lease.holder("o1") is None  # released after the takeover
    assert await chat.sweep() == 0  # nothing left to take
    async with httpx.AsyncClient(base_url=node.url) as http:
        status = (await http.get("/api/status")).json()
    assert status["conversations"]["o1"] == "error"  # the takeover's terminal, cluster-wide


async def test_an_orphan_of_a_live_node_gets_a_whole_ttl_to_be_taken_again(node: Node) -> None:
    chat, cluster = node.takeover, node.cluster
    now = [100.0]
    chat.clock = lambda: now[0]
    await cluster.redis.set(f"{cluster.prefix}:node:alive", "1", px=60_000)
    await _orphan(node, "o2", "alive")
    assert await chat.sweep() == 0
    now[0] += 4.9  # less than the TTL (5 s): still waiting
    assert await chat.sweep() == 0
    now[0] += 0.2
    assert await chat.sweep() == 1


async def test_an_owned_conversation_is_never_taken(node: Node) -> None:
    chat, cluster = node.takeover, node.cluster
    await _orphan(node, "o3", "ghost")
    fence = await cluster.lease.acquire("o3", "someone")
    assert fence is not None
    assert await chat.sweep() == 0
    assert await cluster.lease.holder("o3") == fence


async def test_task_runs_of_a_node_gone_for_a_whole_ttl_are_failed(node: Node) -> None:
    chat, cluster = node.takeover, node.cluster
    schedules = node.runtime.db.schedules
    now = [100.0]
    chat.clock = lambda: now[0]
    await cluster.redis.set(f"{cluster.prefix}:node:alive", "1", px=60_000)
    started = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    owners = {"r-ghost": "ghost", "r-alive": "alive", "r-mine": cluster.node_id}
    for run_id, owner in owners.items():
        schedules.node_id = owner
        await schedules.start_run(kind="manual", started_at=started, run_id=run_id)
    schedules.node_id = cluster.node_id
    assert await chat.sweep_runs() == 0  # the ghost's heartbeat is missing: wait a TTL
    now[0] += 5.0  # the TTL (5 s) has passed
    assert await chat.sweep_runs() == 1
    statuses = {}
    for run_id in owners:
        record = await schedules.get_run(run_id)
        assert record is not None
        statuses[run_id] = record.status
    assert statuses == {"r-ghost": "failed", "r-alive": "running", "r-mine": "running"}
    ghost = await schedules.get_run("r-ghost")
    assert ghost is not None and ghost.error == "the node running it was lost"
