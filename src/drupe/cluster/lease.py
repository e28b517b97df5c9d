"""``RedisLease``: which node owns a conversation's live stream, with a fencing token.

Contract (``docs/lifecycles/cluster.md``):

* ``acquire(conversation, node)`` succeeds for at most one node at a time: one Lua script checks
  that no lease exists, takes the next fencing token from a per-conversation counter (``INCR``,
  floored at the caller's clock in microseconds, so tokens only grow across owners, and across
  a restart of Redis that lost its data too), and sets the lease with ``SET NX PX``. It
  returns a ``Fence`` (node, token), or ``None`` when another node holds it.
* ``renew(fence)`` extends the lease only while it is still that exact fence (same node and
  token); ``release(fence)`` deletes it only then. A node whose lease expired (paused, cut off)
  gets ``False`` from both, and a successor's lease is never touched.
* ``reacquire(fence)``: the owner whose lease vanished takes it again, only when no lease exists
  AND no node acquired one since (the counter is missing, as after Redis lost its data, or not
  above the fence's token). A takeover (which raised the counter) is never undone. A lease the
  same node already took again (two callers racing) is returned as it is.
* ``holder(conversation)`` reads the current fence, for routing and takeover; ``holders`` reads
  many in one ``MGET`` (the takeover sweep's check of every other node's live turn).

Fencing builds on ``Fence.token``: rows store the token of their last writer and refuse a lower
one (``messages.fence``), and chunk-log writes check the lease value in the same Lua call.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["DEFAULT_LEASE_TTL", "Fence", "RedisLease"]

DEFAULT_LEASE_TTL: Final = 10.0
"""Seconds a lease lives without renewal (the issue's default TTL)."""

_ACQUIRE: Final = """
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local token = string.format('%.0f', redis.call('INCR', KEYS[2]))
if tonumber(token) < tonumber(ARGV[3]) then
  token = ARGV[3]
  redis.call('SET', KEYS[2], token)
end
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. token, 'PX', ARGV[2])
return token
"""
_REACQUIRE: Final = """
local held = redis.call('GET', KEYS[1])
if held then
  local prefix = ARGV[1] .. '|'
  if string.sub(held, 1, #prefix) == prefix then return string.sub(held, #prefix + 1) end
  return false
end
local seen = redis.call('GET', KEYS[2])
if seen and tonumber(seen) > tonumber(ARGV[4]) then return false end
local token = string.format('%.0f', redis.call('INCR', KEYS[2]))
if tonumber(token) < tonumber(ARGV[3]) then
  token = ARGV[3]
  redis.call('SET', KEYS[2], token)
end
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. token, 'PX', ARGV[2])
return token
"""
_RENEW: Final = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE: Final = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def _now_us() -> int:
    return time.time_ns() // 1_000


@dataclass(frozen=True, slots=True)
class Fence:
    """A held lease: the conversation, the owning node and its fencing token."""

    conversation_id: str
    node_id: str
    token: int

    @property
    def value(self) -> str:
        return f"{self.node_id}|{self.token}"


class RedisLease:
    """Leases over one Redis client; keys under ``prefix``."""

    def __init__(
        self, redis: Redis, *, prefix: str = "drupe", ttl: float = DEFAULT_LEASE_TTL
    ) -> None:
        if ttl <= 0:
            raise ValueError("the lease TTL must be positive")
        self._redis = redis
        self._prefix = prefix
        self.ttl = ttl
        self._acquire = redis.register_script(_ACQUIRE)
        self._reacquire = redis.register_script(_REACQUIRE)
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(_RELEASE)

    def lease_key(self, conversation_id: str) -> str:
        """The Redis key that holds the conversation's lease (``<node>|<token>``)."""
        return self._keys(conversation_id)[0]

    def fence_key(self, conversation_id: str) -> str:
        """The Redis key of the conversation's fencing-token counter."""
        return self._keys(conversation_id)[1]

    def _keys(self, conversation_id: str) -> tuple[str, str]:
        return (
            f"{self._prefix}:lease:{conversation_id}",
            f"{self._prefix}:fence:{conversation_id}",
        )

    def _ttl_ms(self) -> int:
        return max(1, round(self.ttl * 1000))

    async def acquire(self, conversation_id: str, node_id: str) -> Fence | None:
        """Take the lease, or ``None`` when another node (or this one) already holds it."""
        if "|" in node_id:
            raise ValueError("a node id must not contain '|'")
        token = await self._acquire(
            keys=list(self._keys(conversation_id)), args=[node_id, self._ttl_ms(), _now_us()]
        )
        if token is None:
            return None
        return Fence(conversation_id, node_id, int(token))

    async def reacquire(self, fence: Fence) -> Fence | None:
        """Take a vanished lease again (see the module docstring); ``None`` when it is gone."""
        token = await self._reacquire(
            keys=list(self._keys(fence.conversation_id)),
            args=[fence.node_id, self._ttl_ms(), _now_us(), fence.token],
        )
        if token is None:
            return None
        return Fence(fence.conversation_id, fence.node_id, int(token))

    async def renew(self, fence: Fence) -> bool:
        """Extend the lease by the TTL; ``False`` when it is no longer this fence's."""
        result = await self._renew(
            keys=[self._keys(fence.conversation_id)[0]], args=[fence.value, self._ttl_ms()]
        )
        return bool(result)

    async def release(self, fence: Fence) -> bool:
        """Give the lease up; ``False`` when it was no longer this fence's."""
        result = await self._release(
            keys=[self._keys(fence.conversation_id)[0]], args=[fence.value]
        )
        return bool(result)

    async def holder(self, conversation_id: str) -> Fence | None:
        """The fence that holds the conversation's lease now, if any."""
        return _fence(conversation_id, await self._redis.get(self._keys(conversation_id)[0]))

    async def holders(self, conversation_ids: Sequence[str]) -> list[Fence | None]:
        """``holder`` of each conversation, in order: one ``MGET`` per 1,000 of them."""
        out: list[Fence | None] = []
        for at in range(0, len(conversation_ids), _MGET_KEYS):
            ids = conversation_ids[at : at + _MGET_KEYS]
            values: Any = await self._redis.mget([self._keys(c)[0] for c in ids])
            out += [_fence(c, v) for c, v in zip(ids, values, strict=True)]
        return out


_MGET_KEYS: Final = 1_000


def _fence(conversation_id: str, value: Any) -> Fence | None:
    """The fence a lease's value ``<node>|<token>`` names (``None``: no lease)."""
    if value is None:
        return None
    text = value.decode() if isinstance(value, bytes) else str(value)
    node_id, _, token = text.rpartition("|")
    return Fence(conversation_id, node_id, int(token))
