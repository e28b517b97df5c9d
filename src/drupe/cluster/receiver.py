"""``RedisReceiverLease``: the cluster's implementation of ``channels.receiver.ReceiverLease``.

Contract: a thin adapter over ``RedisLease`` with this node's id; the name ``channel:<id>`` is
stored as ``<prefix>:lease:receiver:channel:<id>`` (the ``receiver:`` namespace keeps it apart
from conversation leases). Acquire is ``SET NX PX`` with a fencing token, renew and release only
touch the exact fence this node took (``lease.py``).
"""

from __future__ import annotations

from drupe.cluster.lease import Fence, RedisLease

__all__ = ["RedisReceiverLease"]


class RedisReceiverLease:
    def __init__(self, lease: RedisLease, node_id: str) -> None:
        self._lease = lease
        self.node_id = node_id

    @property
    def ttl(self) -> float:
        return self._lease.ttl

    async def acquire(self, name: str) -> object | None:
        return await self._lease.acquire(f"receiver:{name}", self.node_id)

    async def renew(self, handle: object) -> bool:
        assert isinstance(handle, Fence)
        return await self._lease.renew(handle)

    async def release(self, handle: object) -> None:
        assert isinstance(handle, Fence)
        await self._lease.release(handle)
