"""Telling that Redis restarted, whatever it came back with (no data, or an older snapshot).

Contract: ``server_id(redis)`` is the server's ``run_id`` (``INFO server``), which Redis draws
anew at every start, or ``None`` when Redis cannot answer (it is away, or ``INFO`` is not
allowed): ask again later. A node compares it with the one it saw before to know that what it
wrote may be gone (the chunk log's live turns, the cluster status's records and counter).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["server_id"]


async def server_id(redis: Redis) -> str | None:
    """The Redis server's run id, or ``None`` when it cannot answer."""
    try:
        info: Any = await redis.info("server")
    except (OSError, RedisError):
        return None
    value = info.get("run_id") if isinstance(info, dict) else None
    return None if value is None else str(value)
