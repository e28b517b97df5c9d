"""``SharedRequestWindow``: a gateway key's requests-per-minute window kept in Redis (cluster mode).

Contract: ``admit(key_id, rpm)`` counts one request of the key in a moving 60-second window
shared by every node (``limits``' Redis storage, keys ``<prefix>:gateway:*``) and answers None
when it is within ``rpm``, else ``(retry_after_s, message)`` with the whole seconds until the
window has room (the same answer as ``KeyLimiter.admit``). A refused request is not counted.
Redis errors raise ``limits.errors.StorageError``; the caller falls back to the node's own
window (``GatewayAccess``), so an unreachable Redis neither blocks the gateway nor lifts limits.
"""

from __future__ import annotations

import math
import time

from limits import RateLimitItemPerMinute

from drupe.identity.redis_windows import RedisWindow

__all__ = ["SharedRequestWindow"]


class SharedRequestWindow:
    def __init__(self, redis_url: str, *, key_prefix: str) -> None:
        self._window = RedisWindow(redis_url, f"{key_prefix}:gateway")
        self._limiter = self._window.limiter

    async def aclose(self) -> None:
        """Disconnect from Redis (the app's shutdown)."""
        await self._window.aclose()

    async def admit(self, key_id: str, rpm: int) -> tuple[int, str] | None:
        item = RateLimitItemPerMinute(rpm)
        if await self._limiter.hit(item, "key", key_id):
            return None
        stats = await self._limiter.get_window_stats(item, "key", key_id)
        wait = max(1, math.ceil(stats.reset_time - time.time()))
        return wait, f"rate limit: {rpm} requests per minute"
