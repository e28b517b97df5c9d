"""Failed sign-ins in cluster mode: one window in Redis for every node (real Redis)."""

from __future__ import annotations

import socket

import pytest
from redis.asyncio import Redis

from drupe.identity.login_limiter import LoginLimiter
from tests.cluster.conftest import redis_url

pytestmark = pytest.mark.anyio


async def test_failures_on_one_node_count_on_every_node(redis: Redis, prefix: str) -> None:
    nodes = [
        LoginLimiter(max_per_user=3, max_per_address=100, redis_url=redis_url(), key_prefix=prefix)
        for _ in range(3)
    ]
    assert all(node.shared for node in nodes)
    # One failure on each node: the user's 3 allowed failures are used up cluster-wide.
    for number, node in enumerate(nodes):
        assert await node.allowed("Ada", f"10.0.0.{number}")
        await node.failed("Ada", f"10.0.0.{number}")
    for node in nodes:
        assert not await node.allowed("ada", "10.0.0.9")  # the name is case-folded
        assert await node.allowed("grace", "10.0.0.9")  # another user is not affected
    assert await redis.keys(f"{prefix}:login*")  # the window is in Redis, under the prefix

    # A node-local limiter (one process) does not see them: the window really is shared.
    alone = LoginLimiter(max_per_user=3, max_per_address=100)
    assert await alone.allowed("ada", "10.0.0.9")

    # Each node's connections are its own, named, and gone once it is closed (app shutdown).
    async def window_clients() -> int:
        return sum(c.get("name") == f"{prefix}:login:window" for c in await redis.client_list())

    assert await window_clients() == 3
    for node in nodes:
        await node.aclose()
    assert await window_clients() == 0
    await alone.aclose()  # no Redis: nothing to close


async def test_while_redis_is_away_each_node_still_counts(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    node = LoginLimiter(
        max_per_user=2, max_per_address=100, redis_url=f"redis://127.0.0.1:{port}/0"
    )
    for _ in range(2):
        assert await node.allowed("ada", "10.0.0.1")
        await node.failed("ada", "10.0.0.1")
    assert not await node.allowed("ada", "10.0.0.1")  # refused, not let through
    warnings = [r for r in caplog.records if "counted per node" in r.getMessage()]
    assert len(warnings) == 1  # once per outage
