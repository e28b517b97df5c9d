"""``RedisLease`` on a real Redis: one holder at a time, growing fencing tokens, no stale writes."""

from __future__ import annotations

import time

from redis.asyncio import Redis

from drupe.cluster.lease import Fence, RedisLease


async def test_only_one_node_holds_a_conversation_and_tokens_only_grow(
    redis: Redis, prefix: str
) -> None:
    lease = RedisLease(redis, prefix=prefix, ttl=10)
    before_us = time.time_ns() // 1_000
    first = await lease.acquire("c1", "node-a")
    assert first is not None and first.node_id == "node-a"
    assert first.token >= before_us  # floored at the clock: survives a Redis data loss
    assert await lease.acquire("c1", "node-b") is None
    assert await lease.acquire("c1", "node-a") is None  # not re-entrant either
    assert await lease.holder("c1") == first
    other = await lease.acquire("c2", "node-b")
    assert other is not None and other.conversation_id == "c2"

    assert await lease.release(first)
    assert await lease.holder("c1") is None
    second = await lease.acquire("c1", "node-b")
    assert second is not None and second.token > first.token


async def test_tokens_keep_growing_after_redis_lost_its_data(redis: Redis, prefix: str) -> None:
    lease = RedisLease(redis, prefix=prefix, ttl=10)
    first = await lease.acquire("c1", "node-a")
    assert first is not None
    await redis.delete(f"{prefix}:lease:c1", f"{prefix}:fence:c1")  # a restart without data
    second = await lease.acquire("c1", "node-b")
    assert second is not None and second.token > first.token


async def test_a_vanished_lease_is_taken_again_only_if_nobody_took_it_since(
    redis: Redis, prefix: str
) -> None:
    lease = RedisLease(redis, prefix=prefix, ttl=10)
    first = await lease.acquire("c1", "node-a")
    assert first is not None
    await redis.delete(f"{prefix}:lease:c1", f"{prefix}:fence:c1")  # Redis lost its data
    again = await lease.reacquire(first)
    assert again is not None and again.token > first.token and again.node_id == "node-a"
    assert await lease.reacquire(first) == again  # a racing second caller gets the same fence
    other = await lease.acquire("c2", "node-b")
    assert other is not None
    assert await lease.reacquire(Fence("c2", "node-a", other.token - 1)) is None  # node-b's
    # A takeover in between: the lease expired, node-b took and released it.
    await redis.delete(f"{prefix}:lease:c1")
    taken = await lease.acquire("c1", "node-b")
    assert taken is not None and await lease.release(taken)
    assert await lease.reacquire(again) is None  # never undoes a takeover
    assert await lease.holder("c1") is None


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


async def test_tokens_above_the_clock_floor_stay_exact_integers(redis: Redis, prefix: str) -> None:
    lease = RedisLease(redis, prefix=prefix, ttl=10)
    ahead = time.time_ns() // 1_000 + 10**9  # a counter ahead of this clock (another node's)
    await redis.set(f"{prefix}:fence:c1", ahead)
    fence = await lease.acquire("c1", "node-a")
    assert fence is not None and fence.token == ahead + 1
    assert await lease.holder("c1") == fence


async def test_holders_reads_many_leases_at_once_as_holder_reads_each(
    redis: Redis, prefix: str
) -> None:
    lease = RedisLease(redis, prefix=prefix, ttl=30)
    held: dict[str, Fence] = {}
    for i in range(0, 2_500, 3):  # past one MGET's 1,000 keys
        fence = await lease.acquire(f"c{i}", f"node-{i % 4}")
        assert fence is not None
        held[f"c{i}"] = fence
    ids = [f"c{i}" for i in range(2_500)]
    got = await lease.holders(ids)
    assert got == [held.get(c) for c in ids]
    assert got[:50] == [await lease.holder(c) for c in ids[:50]]
    assert await lease.holders([]) == []
