"""A gateway key's requests per minute in cluster mode: one window in Redis for every node."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from drupe.gateway.request_window import SharedRequestWindow
from tests.cluster.conftest import redis_url

pytestmark = pytest.mark.anyio


async def test_every_node_counts_in_one_window(redis: Redis, prefix: str) -> None:
    nodes = [SharedRequestWindow(redis_url(), key_prefix=prefix) for _ in range(3)]
    assert [await node.admit("key_a", 3) for node in nodes] == [None, None, None]
    for node in nodes:  # the fourth request is refused on whichever node it reaches
        over = await node.admit("key_a", 3)
        assert over is not None
        wait, message = over
        assert 1 <= wait <= 60 and message == "rate limit: 3 requests per minute"
    assert await nodes[0].admit("key_b", 3) is None  # another key has its own window
    assert await redis.keys(f"{prefix}:gateway*")
