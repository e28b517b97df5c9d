"""Cluster tests run against the real Redis named by ``DRUPE_TEST_REDIS_URL``.

Each test gets its own key prefix and deletes its keys afterwards, so tests (and parallel runs
on the same server) never see each other's data.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/15"


def redis_url() -> str:
    return os.environ.get("DRUPE_TEST_REDIS_URL", DEFAULT_REDIS_URL)


@pytest.fixture
def prefix() -> str:
    return f"drupe-test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def redis(prefix: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url())
    try:
        await client.ping()
    except Exception as err:  # a clear failure, never a skip: Redis is part of the gate
        pytest.fail(f"Redis is not reachable at {redis_url()}: {err}")
    try:
        yield client
    finally:
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()


@pytest.fixture
async def reader_connection() -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url(), single_connection_client=True)
    try:
        yield client
    finally:
        await client.aclose()
