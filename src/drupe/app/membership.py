"""``Membership``: this process's place in a deployment, the composition root's one choice
between one process and a cluster node (``docs/lifecycles/cluster.md``).

Contract:

* ``open_membership(stack, settings)`` returns ``SingleProcess`` (the embedded default: nothing
  to open), or with ``settings.cluster.enabled`` the cluster's
  ``drupe.app.cluster_membership.ClusterMembership`` (imported only then: it brings Redis), its node
  and status entered on ``stack`` first, so they leave last.
* Every face has a one-process form, so nothing after this choice branches on cluster mode:

  ============== ====================================== ===========================================
  face           one process (``SingleProcess``)        cluster node
  ============== ====================================== ===========================================
  node_id        None                                   the node's id (leases, routing, task runs)
  reconcile_rows the crash's pending rows marked error  none (the takeover sweep settles them)
  open_leases    no listener; ``LocalOwnership``        leases, and the chunk-log writer's listener
  watch          nothing to show elsewhere              status changes shown cluster-wide
  open_port      the local ``Conversations`` port       ``ClusterConversations`` + router + sweep
  sweep          finds nothing (0)                      takes over the orphans of dead owners
  follow         nothing (every write goes through it)  polls what other nodes may have written
  receiving      ``SoleReceiver``: receives at once     ``LeasedReceiver``: while it holds the lease
  ============== ====================================== ===========================================
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Protocol

from anyio.abc import TaskGroup

from drupe.admission.ownership import LocalOwnership, Ownership
from drupe.channels.receiver import Receiving, SoleReceiver
from drupe.persistence.boot import reconcile_at_boot
from drupe.settings import Settings
from drupe.streaming.manager import StreamManager

if TYPE_CHECKING:
    from drupe.admission.conversations import Conversations
    from drupe.admission.local_conversations import LocalConversations
    from drupe.persistence.db import Database
    from drupe.streaming.listeners.base import Listener

__all__ = ["Membership", "SingleProcess", "open_membership"]


class Membership(Protocol):
    """The faces of a deployment the runtime is composed over (see the module docstring)."""

    @property
    def node_id(self) -> str | None: ...

    @property
    def ownership(self) -> Ownership:
        """Who may admit a turn of a conversation (after ``open_leases``)."""
        ...

    async def reconcile_rows(self, db: Database) -> int:
        """Boot: the answers a crash left pending that this process settles (the count)."""
        ...

    async def open_leases(
        self, stack: AsyncExitStack, manager_ref: list[StreamManager]
    ) -> list[Callable[[str], Listener]]:
        """Enter what fences this process's streams; the listeners every stream gets."""
        ...

    def watch(self, manager: StreamManager) -> None:
        """Observe the manager's status changes for the rest of the deployment."""
        ...

    async def open_port(
        self,
        stack: AsyncExitStack,
        local: LocalConversations,
        manager: StreamManager,
        db: Database,
    ) -> Conversations:
        """The ``Conversations`` port every surface acts through."""
        ...

    async def sweep(self) -> int:
        """Take over the conversations of dead owners now (the count)."""
        ...

    def follow(self, group: TaskGroup, poll: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Keep state other processes may change (stored settings) current: ``poll`` runs in
        ``group`` until it is cancelled, or not at all when every write goes through here."""
        ...

    def receiving(self) -> Receiving:
        """How this node receives a single-connection channel."""
        ...


class SingleProcess:
    """One process owns everything: no node, no lease, no log, no one to tell."""

    node_id: str | None = None

    def __init__(self) -> None:
        self.ownership = LocalOwnership()

    async def reconcile_rows(self, db: Database) -> int:
        return await reconcile_at_boot(db)

    async def open_leases(
        self, stack: AsyncExitStack, manager_ref: list[StreamManager]
    ) -> list[Callable[[str], Listener]]:
        return []

    def watch(self, manager: StreamManager) -> None:
        return None

    async def open_port(
        self,
        stack: AsyncExitStack,
        local: LocalConversations,
        manager: StreamManager,
        db: Database,
    ) -> Conversations:
        return local

    async def sweep(self) -> int:
        return 0

    def follow(self, group: TaskGroup, poll: Callable[[], Coroutine[Any, Any, None]]) -> None:
        return None  # every write goes through this process

    def receiving(self) -> Receiving:
        return SoleReceiver()


async def open_membership(stack: AsyncExitStack, settings: Settings) -> Membership:
    if not settings.cluster.enabled:
        return SingleProcess()
    from drupe.app.cluster_membership import ClusterMembership

    return await ClusterMembership.open(stack, settings)
