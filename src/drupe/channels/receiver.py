"""``ReceiverLease``: which cluster node receives a single-connection channel's inbound events.

Contract:

* A channel whose platform delivers inbound events over ONE connection (Telegram long polling,
  Slack Socket Mode; ``ChannelConfig.single_receiver``) must be received by one node of a
  cluster: two Telegram pollers fight (``409 Conflict``) and each update would be answered
  twice. ``serve_single_receiver`` runs the adapter for sending only (``receive=False``) until
  this node holds the channel's lease, then receives while it holds it: the lease is renewed
  every third of its TTL; a renewal that fails (the lease was lost: this node stalled past the
  TTL) stops receiving at once and goes back to standby. A node that stops (or dies) lets the
  lease go (released, or expired after the TTL), and a standby node takes over within about a
  TTL.
* The lease is what the cluster provides (``drupe.cluster.receiver.RedisReceiverLease``). A
  channel runtime asks its ``Receiving`` face: ``LeasedReceiver`` over the cluster's lease, or
  ``SoleReceiver`` in one process, which receives every channel itself (the adapter runs once;
  when it stops, the channel is disconnected, as without a cluster).
* A lease error (Redis unreachable) never stops receiving on the node that holds it: the TTL
  decides, and the next renewal says whether it still holds it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

import anyio

__all__ = ["LeasedReceiver", "ReceiverLease", "Receiving", "SoleReceiver", "serve_single_receiver"]

log = logging.getLogger(__name__)

_RETRY_AFTER_FAILURE = 1.0


class ReceiverLease(Protocol):
    """A cluster-wide lease on a name (``channel:<id>``)."""

    @property
    def ttl(self) -> float: ...

    async def acquire(self, name: str) -> object | None:
        """A handle when this node now holds the lease; None when another node does."""
        ...

    async def renew(self, handle: object) -> bool:
        """Extend the lease; False when it is no longer this node's."""
        ...

    async def release(self, handle: object) -> None: ...


Run = Callable[[bool], Coroutine[Any, Any, None]]
"""``run(receive)``: the channel's adapter, receiving or only sending."""


class Receiving(Protocol):
    """How a single-connection channel is received on this node."""

    async def serve(self, name: str, run: Run, on_role: Callable[[str], None]) -> None: ...


class SoleReceiver:
    """One process: the only node, so it receives at once (``on_role`` is never told)."""

    async def serve(self, name: str, run: Run, on_role: Callable[[str], None]) -> None:
        await run(True)


class LeasedReceiver:
    """A cluster node: receives while it holds the channel's lease (``serve_single_receiver``)."""

    def __init__(self, lease: ReceiverLease) -> None:
        self.lease = lease

    async def serve(self, name: str, run: Run, on_role: Callable[[str], None]) -> None:
        await serve_single_receiver(self.lease, name, run, on_role=on_role)


async def serve_single_receiver(
    lease: ReceiverLease,
    name: str,
    run: Callable[[bool], Coroutine[Any, Any, None]],
    on_role: Callable[[str], None] = lambda role: None,
) -> None:
    """Run ``run(receive)`` as described in the module docstring, until cancelled."""
    period = lease.ttl / 3
    while True:
        on_role("standby")
        async with anyio.create_task_group() as standby:
            standby.start_soon(run, False)
            handle = await _acquire(lease, name, period)
            standby.cancel_scope.cancel()
        on_role("receiver")
        log.info("this node now receives %s", name)
        try:
            async with anyio.create_task_group() as receiving:
                receiving.start_soon(_keep, lease, handle, period, receiving.cancel_scope, name)
                await run(True)
                receiving.cancel_scope.cancel()  # the adapter stopped (an error): let go
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    await lease.release(handle)
                except Exception as err:  # isolation boundary: it expires after the TTL
                    log.warning("releasing %s failed (it expires): %s", name, err)
        await anyio.sleep(_RETRY_AFTER_FAILURE)


async def _acquire(lease: ReceiverLease, name: str, period: float) -> object:
    while True:
        try:
            handle = await lease.acquire(name)
        except Exception as err:  # isolation boundary: Redis down; try again
            log.warning("taking %s failed: %s", name, err)
            handle = None
        if handle is not None:
            return handle
        await anyio.sleep(period)


async def _keep(
    lease: ReceiverLease, handle: object, period: float, scope: anyio.CancelScope, name: str
) -> None:
    while True:
        await anyio.sleep(period)
        try:
            held = await lease.renew(handle)
        except Exception as err:  # isolation boundary: the TTL decides
            log.warning("renewing %s failed: %s", name, err)
            continue
        if not held:
            log.warning("lost %s: another node receives it now", name)
            scope.cancel()
            return
