"""Cluster mode's openers: this process's node, the cluster-wide status, the leases and the
chunk-log writer (``docs/lifecycles/cluster.md``).
"""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from drupe.settings import Settings
from drupe.streaming.manager import StreamManager

if TYPE_CHECKING:
    from drupe.cluster.log_writer import LogWriter
    from drupe.cluster.node import ClusterNode
    from drupe.cluster.ownership import LeaseOwnership
    from drupe.cluster.status import ClusterStatus


log = logging.getLogger(__name__)


async def open_cluster_node(stack: AsyncExitStack, settings: Settings) -> ClusterNode | None:
    if not settings.cluster.enabled:
        return None
    from drupe.cluster.node import ClusterNode

    node = await stack.enter_async_context(ClusterNode(settings.cluster))
    log.info("cluster mode: node %s", node.node_id)
    return node


async def open_cluster_status(
    stack: AsyncExitStack, cluster: ClusterNode | None, settings: Settings
) -> ClusterStatus | None:
    """Cluster mode: share this node's statuses. Entered before the stream manager, so it
    leaves after it and writes the shutdown's aborts before the node closes Redis."""
    if cluster is None:
        return None
    from drupe.cluster.status import ClusterStatus

    status = ClusterStatus(cluster, max_records=settings.stream.max_status_records)
    return await stack.enter_async_context(status)


async def open_cluster_parts(
    stack: AsyncExitStack,
    cluster: ClusterNode,
    settings: Settings,
    manager_ref: list[StreamManager],
) -> tuple[LeaseOwnership, LogWriter]:
    """This node's leases (busy while a stream, even a finished one in its grace period, or a
    queued steer needs it; a lost lease aborts the local stream) and its chunk-log writer."""
    from drupe.cluster.log_writer import LogWriter
    from drupe.cluster.ownership import LeaseOwnership

    def busy(conversation_id: str) -> bool:
        current = manager_ref[0]
        return current.get(conversation_id) is not None or current.has_pending_steer(
            conversation_id
        )

    def on_lost(conversation_id: str) -> None:
        manager_ref[0].abort(conversation_id, "lease-lost")

    ownership = await stack.enter_async_context(
        LeaseOwnership(cluster.lease, cluster.node_id, busy=busy, on_lost=on_lost)
    )
    writer = await stack.enter_async_context(
        LogWriter(
            cluster.redis,
            cluster.log,
            node_id=cluster.node_id,
            fence_of=ownership.fence,
            lease_key=cluster.lease.lease_key,
            recover=ownership.recover,
            window=settings.cluster.coalesce_window,
            terminal_timeout=settings.stream.terminal_timeout,
        )
    )
    return ownership, writer
