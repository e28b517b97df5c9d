"""``LeaseOwnership``: this node's leases on the conversations it owns (the ``Ownership`` port).

Contract (``docs/lifecycles/cluster.md``, "Ownership"):

* ``hold(conversation)`` (entered by ``Dispatcher.dispatch`` before the local lock) keeps the
  node's lease for the block: a lease the node already holds is reused; otherwise it is
  acquired (``SET NX PX`` + a new fencing token). When another node holds it, ``NotOwnerError``
  names that node and nothing was written. A conversation stays owned while the block runs
  and, after it, while ``busy(conversation)`` says so (a live or held stream, a queued steer,
  a stream inside its grace period).
* One renewal loop (a task of the keeper's task group) renews every held lease each third of
  the TTL. A conversation that is no longer busy is released. A renewal that fails means the
  lease vanished: if no node took it since (Redis restarted without its data), it is taken
  again (``recover``: a new, higher token that rows and the log accept); otherwise it was lost
  (this node was paused or cut off past the TTL, and a successor took over). The lost fence is
  kept as *stale* (``fence_for`` still returns its token, so every fenced write of this node is
  refused by PostgreSQL and by the chunk log) and ``on_lost(conversation)`` is called once (the
  shell aborts the local stream).
* ``fence_for`` is the token this node's row writes carry; ``fence(conversation)`` the full
  fence (for fenced chunk-log writes); both None for a conversation this node never owned.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

import anyio
import anyio.abc
from redis.exceptions import RedisError

from drupe.cluster.lease import Fence, RedisLease
from drupe.errors import NotOwnerError, OwnerUnavailableError
from drupe.lifetimes import TaskOwner

__all__ = ["LeaseOwnership"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Held:
    fence: Fence
    users: int = 0
    stale: bool = False


class LeaseOwnership(TaskOwner):
    """Leases of one node; use as an async context manager (it owns the renewal loop)."""

    after_timeout = 2.0  # releasing the held leases on exit

    def __init__(
        self,
        lease: RedisLease,
        node_id: str,
        *,
        busy: Callable[[str], bool],
        on_lost: Callable[[str], None] = lambda conversation_id: None,
    ) -> None:
        self.lease = lease
        self.node_id = node_id
        self.busy = busy
        self.on_lost = on_lost
        self._held: dict[str, _Held] = {}
        self._stale: dict[str, Fence] = {}
        self.renewals = 0
        self.lost = 0
        self.recovered = 0

    async def _start_tasks(self, group: anyio.abc.TaskGroup) -> None:
        group.start_soon(self._renew_loop)

    async def _after_tasks(self) -> None:
        for conversation_id in list(self._held):
            await self._release(conversation_id)

    # --- the port ----------------------------------------------------------------------------

    def hold(self, conversation_id: str) -> AbstractAsyncContextManager[None]:
        return self._holding(conversation_id)

    def fence_for(self, conversation_id: str) -> int | None:
        fence = self.fence(conversation_id)
        return None if fence is None else fence.token

    def fence(self, conversation_id: str) -> Fence | None:
        held = self._held.get(conversation_id)
        if held is not None:
            return held.fence
        return self._stale.get(conversation_id)

    def owns(self, conversation_id: str) -> bool:
        held = self._held.get(conversation_id)
        return held is not None and not held.stale

    @property
    def held(self) -> list[str]:
        return [c for c, h in self._held.items() if not h.stale]

    @asynccontextmanager
    async def _holding(self, conversation_id: str) -> AsyncIterator[None]:
        held = await self.claim(conversation_id)
        held.users += 1
        try:
            yield
        finally:
            held.users -= 1

    async def claim(self, conversation_id: str) -> _Held:
        """Own the conversation now (see the module docstring); raises ``NotOwnerError``."""
        held = self._held.get(conversation_id)
        if held is not None and not held.stale:
            return held
        try:
            fence = await self.lease.acquire(conversation_id, self.node_id)
            holder = None if fence is not None else await self.lease.holder(conversation_id)
        except (OSError, RedisError) as err:
            raise OwnerUnavailableError(
                f"cannot reach Redis to own conversation {conversation_id!r}: {err}",
                retry_after=1.0,
            ) from err
        if fence is None:
            if holder is None:  # released between the two reads: try once more
                return await self.claim(conversation_id)
            if holder.node_id == self.node_id:
                # This node's own older lease (e.g. a restart under the same node id).
                fence = holder
            else:
                raise NotOwnerError(conversation_id, holder.node_id)
        self._stale.pop(conversation_id, None)
        held = self._held[conversation_id] = _Held(fence)
        return held

    # --- renewal -----------------------------------------------------------------------------

    async def _renew_loop(self) -> None:
        period = self.lease.ttl / 3
        while True:
            await anyio.sleep(period)
            await self.renew_all()

    async def renew_all(self) -> None:
        """Release idle leases, renew the others, report the lost ones (one pass)."""
        for conversation_id, held in list(self._held.items()):
            if held.stale:
                continue
            if held.users == 0 and not self.busy(conversation_id):
                await self._release(conversation_id)
                continue
            try:
                renewed = await self.lease.renew(held.fence)
            except (OSError, RedisError) as err:
                log.warning("lease renewal of %r failed: %s", conversation_id, err)
                continue  # Redis is down: the TTL decides; the next pass retries
            self.renewals += 1
            if not renewed and await self.recover(conversation_id) is None:
                self._lose(conversation_id, held)

    async def recover(self, conversation_id: str) -> Fence | None:
        """Take a vanished lease of a conversation this node owns again (Redis lost its data):
        only when no node took it since (``RedisLease.reacquire``). Returns the new fence, or
        None (lost for good, or not owned here)."""
        held = self._held.get(conversation_id)
        if held is None or held.stale:
            return None
        try:
            fence = await self.lease.reacquire(held.fence)
        except (OSError, RedisError):
            return None
        if fence is not None:
            log.warning(
                "the lease of %r had vanished (Redis lost its data?); re-taken with token %d",
                conversation_id,
                fence.token,
            )
            held.fence = fence
            self.recovered += 1
        return fence

    def _lose(self, conversation_id: str, held: _Held) -> None:
        self.lost += 1
        held.stale = True
        self._held.pop(conversation_id, None)
        self._stale[conversation_id] = held.fence
        if len(self._stale) > 10_000:  # bounded: the oldest stale fences go first
            self._stale.pop(next(iter(self._stale)))
        log.warning(
            "lost the lease of %r (token %d): another node may own it; stopping here",
            conversation_id,
            held.fence.token,
        )
        try:
            self.on_lost(conversation_id)
        except Exception:  # isolation boundary: the callback is the shell's
            log.exception("on_lost(%r) raised", conversation_id)

    async def _release(self, conversation_id: str) -> None:
        held = self._held.pop(conversation_id, None)
        if held is None or held.stale:
            return
        try:
            await self.lease.release(held.fence)
        except (OSError, RedisError) as err:
            log.warning("lease release of %r failed (it expires): %s", conversation_id, err)
