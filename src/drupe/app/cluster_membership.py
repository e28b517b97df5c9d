"""``ClusterMembership``: a cluster node's faces, opened in the order shutdown needs
(``docs/lifecycles/cluster.md``); the port and its one-process form are ``drupe.app.membership``.
Imported only in cluster mode (it brings Redis).

Contract (the composition root's ``Membership``):

* ``open(stack, settings)`` enters the node (Redis, its reader) and the cluster-wide status
  before anything else, so they leave after the stream manager and the status writes the
  shutdown's aborts before the node closes Redis.
* ``reconcile_rows`` finalizes no rows at boot: other nodes' rows are live, and the takeover
  sweep settles only the rows whose owner's lease is dead.
* ``open_leases`` enters this node's leases (busy while a stream, even a finished one in its
  grace period, or a queued steer needs it; a lost lease aborts the local stream) and the
  chunk-log writer, and returns the stream listener that feeds the writer. The leases ask the
  manager whether a conversation is busy, and the manager's streams write to the log the leases
  fence: the one cycle, broken by ``manager_ref`` (the manager is appended once opened).
* ``ownership`` is the leases once ``open_leases`` ran; asking before is a programming error.
* ``watch(manager)`` shows this node's status changes cluster-wide (never removed: it must see
  the shutdown's aborts).
* ``open_port`` enters the routed commands (``ClusterRouter``) and this node's takeover sweep, and
  returns the cluster's ``Conversations`` port over the local one.
* ``follow`` runs a poll of state other nodes may change (stored settings) in the given group.
* ``receiving`` receives a single-connection channel while this node holds its Redis lease.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from anyio.abc import TaskGroup

from drupe.channels.receiver import LeasedReceiver
from drupe.cluster.cluster_conversations import ClusterConversations
from drupe.cluster.log_writer import LogWriter
from drupe.cluster.node import ClusterNode
from drupe.cluster.ownership import LeaseOwnership
from drupe.cluster.receiver import RedisReceiverLease
from drupe.cluster.router import ClusterRouter
from drupe.cluster.status import ClusterStatus
from drupe.cluster.takeover import Takeover
from drupe.settings import Settings
from drupe.streaming.manager import StreamManager

if TYPE_CHECKING:
    from drupe.admission.conversations import Conversations
    from drupe.admission.local_conversations import LocalConversations
    from drupe.persistence.db import Database
    from drupe.streaming.listeners.base import Listener

__all__ = ["ClusterMembership"]

log = logging.getLogger(__name__)


class ClusterMembership:
    """This process as one node of a cluster (PostgreSQL + Redis)."""

    def __init__(self, node: ClusterNode, status: ClusterStatus, settings: Settings) -> None:
        self.node = node
        self.status = status
        self.settings = settings
        self._leases: tuple[LeaseOwnership, LogWriter] | None = None
        self._takeover: Takeover | None = None

    @classmethod
    async def open(cls, stack: AsyncExitStack, settings: Settings) -> ClusterMembership:
        node = await stack.enter_async_context(ClusterNode(settings.cluster))
        log.info("cluster mode: node %s", node.node_id)
        status = await stack.enter_async_context(
            ClusterStatus(node, max_records=settings.stream.max_status_records)
        )
        return cls(node, status, settings)

    @property
    def node_id(self) -> str:
        return self.node.node_id

    @property
    def ownership(self) -> LeaseOwnership:
        return self._opened()[0]

    @property
    def takeover(self) -> Takeover:
        """This node's takeover sweep (entered by ``open_port``)."""
        assert self._takeover is not None, "open_port() first"
        return self._takeover

    async def reconcile_rows(self, db: Database) -> int:
        return 0

    async def open_leases(
        self, stack: AsyncExitStack, manager_ref: list[StreamManager]
    ) -> list[Callable[[str], Listener]]:
        def busy(conversation_id: str) -> bool:
            current = manager_ref[0]
            return current.get(conversation_id) is not None or current.has_pending_steer(
                conversation_id
            )

        def on_lost(conversation_id: str) -> None:
            manager_ref[0].abort(conversation_id, "lease-lost")

        node = self.node
        ownership = await stack.enter_async_context(
            LeaseOwnership(node.lease, node.node_id, busy=busy, on_lost=on_lost)
        )
        writer = await stack.enter_async_context(
            LogWriter(
                node.redis,
                node.log,
                node_id=node.node_id,
                fence_of=ownership.fence,
                lease_key=node.lease.lease_key,
                recover=ownership.recover,
                window=self.settings.cluster.coalesce_window,
                terminal_timeout=self.settings.stream.terminal_timeout,
            )
        )
        self._leases = (ownership, writer)
        return [writer.listener]

    def watch(self, manager: StreamManager) -> None:
        manager.add_status_observer(self.status.observe)

    async def open_port(
        self,
        stack: AsyncExitStack,
        local: LocalConversations,
        manager: StreamManager,
        db: Database,
    ) -> Conversations:
        ownership, writer = self._opened()
        router = await stack.enter_async_context(
            ClusterRouter(
                self.node, dispatcher=local.dispatcher, local=local, announce=writer.announce
            )
        )
        self._takeover = await stack.enter_async_context(
            Takeover(
                self.node,
                ownership,
                dispatcher=local.dispatcher,
                manager=manager,
                messages=db.messages,
                settle=self.status.settle,
                schedules=db.schedules,
            )
        )
        return ClusterConversations(
            local, router, grace_period=self.settings.stream.grace_period, status=self.status
        )

    async def sweep(self) -> int:
        return await self.takeover.sweep()

    def follow(self, group: TaskGroup, poll: Callable[[], Coroutine[Any, Any, None]]) -> None:
        group.start_soon(poll)

    def receiving(self) -> LeasedReceiver:
        return LeasedReceiver(RedisReceiverLease(self.node.lease, self.node.node_id))

    def _opened(self) -> tuple[LeaseOwnership, LogWriter]:
        assert self._leases is not None, "open_leases() first"
        return self._leases
