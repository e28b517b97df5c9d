"""``LoginLimiter``: failed sign-ins allowed per minute, per user name and per client address.

Contract: ``allowed(name, address)`` is False once either has ``max_per_user`` /
``max_per_address`` failures within the last minute (a moving window, ``limits``); while it is
False a sign-in is refused with 429 before the password is even checked, so guessing stalls.
``failed(name, address)`` counts one failure against both. A success does not reset the
count (an attacker interleaving a known account cannot reset it).

Where the window lives: in the process, or, given ``redis_url`` (cluster mode), in Redis
(``limits``' Redis storage, keys ``<key_prefix>:login:*``), so the cluster's nodes share ONE
window and N nodes do not allow N times the guesses. While Redis cannot be reached, each node
counts in its own window (logged once per outage) rather than letting every attempt through.
"""

from __future__ import annotations

import logging

from limits import RateLimitItem, RateLimitItemPerMinute
from limits.aio.storage import MemoryStorage
from limits.aio.strategies import MovingWindowRateLimiter
from limits.errors import StorageError

from drupe.identity.redis_windows import RedisWindow

__all__ = ["LoginLimiter"]

log = logging.getLogger(__name__)


class LoginLimiter:
    def __init__(
        self,
        *,
        max_per_user: int,
        max_per_address: int,
        redis_url: str | None = None,
        key_prefix: str = "drupe",
    ) -> None:
        self._local = MovingWindowRateLimiter(MemoryStorage())
        self._shared: MovingWindowRateLimiter | None = None
        self._window: RedisWindow | None = None
        if redis_url is not None:
            self._window = RedisWindow(redis_url, f"{key_prefix}:login")
            self._shared = self._window.limiter
        self._outage = False
        self._per_user = RateLimitItemPerMinute(max_per_user)
        self._per_address = RateLimitItemPerMinute(max_per_address)

    async def aclose(self) -> None:
        """Disconnect from Redis, if the window is there (the app's shutdown)."""
        if self._window is not None:
            await self._window.aclose()

    @property
    def shared(self) -> bool:
        """Whether the window is kept in Redis (shared by the cluster's nodes)."""
        return self._shared is not None

    async def allowed(self, name: str, address: str) -> bool:
        return await self._test(self._per_user, "user", name.lower()) and await self._test(
            self._per_address, "address", address
        )

    async def failed(self, name: str, address: str) -> None:
        await self._hit(self._per_user, "user", name.lower())
        await self._hit(self._per_address, "address", address)

    async def _test(self, item: RateLimitItem, *key: str) -> bool:
        if self._shared is not None:
            try:
                allowed = await self._shared.test(item, *key)
            except StorageError as err:
                self._lost(err)
            else:
                self._outage = False
                return allowed
        return await self._local.test(item, *key)

    async def _hit(self, item: RateLimitItem, *key: str) -> None:
        await self._local.hit(item, *key)  # kept too: the window while Redis is away
        if self._shared is not None:
            try:
                await self._shared.hit(item, *key)
            except StorageError as err:
                self._lost(err)

    def _lost(self, err: StorageError) -> None:
        if not self._outage:
            self._outage = True
            log.warning("failed sign-ins counted per node: Redis unreachable (%s)", err)
