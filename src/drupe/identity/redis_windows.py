"""``RedisWindow``: a ``limits`` moving-window limiter whose windows live in Redis.

Contract: the windows are keys ``<key_prefix>:*`` of the Redis at ``redis_url`` (shared by every
node that names the same Redis and prefix), through redis-py on a connection pool this object
owns (no connection is made before the first check; each is named ``<key_prefix>:window`` in
``CLIENT LIST``); a Redis error raises
``limits.errors.StorageError`` (the callers fall back to a window of their own node).
``aclose()`` disconnects the pool (the app calls it at shutdown); it may be called more than
once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from limits.aio.storage import RedisStorage
from limits.aio.strategies import MovingWindowRateLimiter

if TYPE_CHECKING:
    from redis.asyncio import ConnectionPool

__all__ = ["RedisWindow"]


class RedisWindow:
    """One Redis-backed moving-window limiter (``limiter``) and the pool under it."""

    def __init__(self, redis_url: str, key_prefix: str) -> None:
        from redis.asyncio import ConnectionPool  # cluster mode only: not on every boot

        # Named, so that CLIENT LIST says whose connections these are.
        name = f"{key_prefix}:window"
        self._pool: ConnectionPool = ConnectionPool.from_url(redis_url, client_name=name)
        pool: dict[str, Any] = {"connection_pool": self._pool}  # limits' stubs omit it
        storage = RedisStorage(
            f"async+{redis_url}",
            implementation="redispy",
            key_prefix=key_prefix,
            wrap_exceptions=True,
            **pool,
        )
        self.limiter = MovingWindowRateLimiter(storage)

    async def aclose(self) -> None:
        await self._pool.aclose()
