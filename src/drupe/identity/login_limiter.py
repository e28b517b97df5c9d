"""``LoginLimiter``: failed sign-ins allowed per minute, per user name and per client address.

Contract: ``allowed(name, address)`` is False once either has ``max_per_user`` /
``max_per_address`` failures within the last minute (a moving window, ``limits``); while it is
False a sign-in is refused with 429 before the password is even checked, so guessing stalls.
``failed(name, address)`` counts one failure against both. A success does not reset the
count (an attacker interleaving a known account cannot reset it). Per process: in cluster
mode each node keeps its own window.
"""

from __future__ import annotations

from limits import RateLimitItemPerMinute
from limits.aio.storage import MemoryStorage
from limits.aio.strategies import MovingWindowRateLimiter

__all__ = ["LoginLimiter"]


class LoginLimiter:
    def __init__(self, *, max_per_user: int, max_per_address: int) -> None:
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self._per_user = RateLimitItemPerMinute(max_per_user)
        self._per_address = RateLimitItemPerMinute(max_per_address)

    async def allowed(self, name: str, address: str) -> bool:
        return await self._limiter.test(
            self._per_user, "user", name.lower()
        ) and await self._limiter.test(self._per_address, "address", address)

    async def failed(self, name: str, address: str) -> None:
        await self._limiter.hit(self._per_user, "user", name.lower())
        await self._limiter.hit(self._per_address, "address", address)
