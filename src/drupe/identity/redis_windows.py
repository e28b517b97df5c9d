"""``redis_moving_window``: a ``limits`` moving-window limiter whose windows live in Redis.

Contract: the windows are keys ``<key_prefix>:*`` of the Redis at ``redis_url`` (shared by every
node that names the same Redis and prefix), through redis-py; a Redis error raises
``limits.errors.StorageError`` (the callers fall back to a window of their own node).
"""

from __future__ import annotations

from limits.aio.storage import RedisStorage
from limits.aio.strategies import MovingWindowRateLimiter

__all__ = ["redis_moving_window"]


def redis_moving_window(redis_url: str, key_prefix: str) -> MovingWindowRateLimiter:
    storage = RedisStorage(
        f"async+{redis_url}", implementation="redispy", key_prefix=key_prefix, wrap_exceptions=True
    )
    return MovingWindowRateLimiter(storage)
