"""``NodeHeartbeat``: which nodes of a cluster are alive, by a key each keeps fresh.

Contract (``docs/lifecycles/cluster.md``, "Cluster-wide status"):

* A node keeps ``<prefix>:node:<node_id>`` (its last beat's time) with a TTL of the lease TTL,
  set again every third of it (``run``), and its id in the sorted set ``<prefix>:nodes``, scored
  by the last beat; ids not seen for ``horizon`` seconds (a day) are pruned at each beat.
* ``dead(candidates)`` names the candidates whose key is gone: a node that stopped beating (a
  kill, a pause, a lost network) for longer than the TTL. ``known()`` lists ``<prefix>:nodes``.
* ``leave()`` deletes the node's key and id: a node that stops cleanly is gone, not dead.

A failed beat is logged and tried again at the next one; the key lives a whole TTL, so two
failed beats in a row are needed before other nodes see this one as dead.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

import anyio
from redis.exceptions import RedisError

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["DEFAULT_HORIZON", "NodeHeartbeat", "heartbeat_key", "nodes_key"]

log = logging.getLogger(__name__)

DEFAULT_HORIZON: Final = 86_400.0
"""Seconds a node id stays in ``<prefix>:nodes`` after its last beat."""


def heartbeat_key(prefix: str, node_id: str) -> str:
    return f"{prefix}:node:{node_id}"


def nodes_key(prefix: str) -> str:
    return f"{prefix}:nodes"


class NodeHeartbeat:
    """One node's heartbeat, and the liveness of the others; see the module docstring."""

    def __init__(
        self,
        redis: Redis,
        *,
        prefix: str,
        node_id: str,
        ttl: float,
        horizon: float = DEFAULT_HORIZON,
    ) -> None:
        if ttl <= 0:
            raise ValueError("the heartbeat TTL must be positive")
        self._redis = redis
        self.prefix = prefix
        self.node_id = node_id
        self.ttl = ttl
        self.horizon = horizon

    async def beat(self) -> None:
        """Set this node's key (TTL: ``ttl``) and its score in the node set."""
        now = time.time()
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(
                heartbeat_key(self.prefix, self.node_id),
                f"{now:.3f}",
                px=max(1, math.ceil(self.ttl * 1000)),
            )
            pipe.zadd(nodes_key(self.prefix), {self.node_id: now})
            pipe.zremrangebyscore(nodes_key(self.prefix), "-inf", now - self.horizon)
            await pipe.execute()

    async def run(self) -> None:
        """Beat every third of the TTL until cancelled."""
        while True:
            await anyio.sleep(self.ttl / 3)
            try:
                await self.beat()
            except (OSError, RedisError) as err:
                log.warning("heartbeat of node %s failed: %s", self.node_id, err)

    async def leave(self) -> None:
        """Remove this node's key and id (a clean stop)."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(heartbeat_key(self.prefix, self.node_id))
            pipe.zrem(nodes_key(self.prefix), self.node_id)
            await pipe.execute()

    async def known(self) -> set[str]:
        """The ids in ``<prefix>:nodes`` (seen within the horizon)."""
        members: Any = await self._redis.zrange(nodes_key(self.prefix), 0, -1)
        return {m.decode() if isinstance(m, bytes) else str(m) for m in members or ()}

    async def dead(self, candidates: Iterable[str]) -> set[str]:
        """The candidates (other than this node) whose heartbeat key is gone."""
        ordered = sorted(set(candidates) - {self.node_id})
        if not ordered:
            return set()
        async with self._redis.pipeline(transaction=False) as pipe:
            for node_id in ordered:
                pipe.exists(heartbeat_key(self.prefix, node_id))
            alive = await pipe.execute()
        return {node_id for node_id, found in zip(ordered, alive, strict=True) if not found}
