"""``RedisLease`` on a real Redis: one holder at a time, growing fencing tokens, no stale writes."""

from __future__ import annotations

from redis.asyncio import Redis

from drupe.cluster.lease import Fence, RedisLease


async def test_only_one_node_holds_a_conversation_and_tokens_only_grow(
    redis: Redis, prefix: str
) -> None:
    lease = RedisLease(redis, prefix=prefix, ttl=10)
    first = await lease.acquire("c1", "node-a")
    assert first == Fence("c1", "node-a", 1)
    assert await lease.acquire("c1", "node-b") is None
    assert await lease.acquire("c1", "node-a") is None  # not re-entrant either
    assert await lease.holder("c1") == first
    assert await lease.acquire("c2", "node-b") == Fence("c2", "node-b", 1)

    assert await lease.release(first)
    assert await lease.holder("c1") is None
    second = await lease.acquire("c1", "node-b")
    assert second is not None and second.token == 2


async def test_an_owner_whose_lease_expired_cannot_renew_or_release_its_successors_lease(
    redis: Redis, prefix: str
) -> None:
    lease = RedisLease(redis, prefix=prefix, ttl=10)
    stale = await lease.acquire("c1", "node-a")
    assert stale is not None
    await redis.delete(f"{prefix}:lease:c1")  # what the TTL does to a paused owner's lease
    successor = await lease.acquire("c1", "node-b")
    assert successor is not None and successor.token > stale.token

    assert not await lease.renew(stale)
    assert not await lease.release(stale)
    assert await lease.holder("c1") == successor
    assert await lease.renew(successor)


async def test_renewal_extends_the_lease_to_the_full_ttl(redis: Redis, prefix: str) -> None:
    lease = RedisLease(redis, prefix=prefix, ttl=10)
    fence = await lease.acquire("c1", "node-a")
    assert fence is not None
    await redis.pexpire(f"{prefix}:lease:c1", 500)
    assert await lease.renew(fence)
    assert 9_000 < await redis.pttl(f"{prefix}:lease:c1") <= 10_000
