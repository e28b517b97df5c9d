"""The stream layer's openers: tools, the MCP catalog, the boot reconcile, and the retrier,
checkpointer, trace recorder, cluster leases and log writer and the stream manager, in the
order their shutdown needs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from drupe.agent.models.registry import ModelRegistry
from drupe.app.cluster_parts import open_cluster_parts
from drupe.errors import ConfigError
from drupe.observability.trace_store import TraceRecorder, TraceStore, otlp_exporter_from_env
from drupe.persistence.boot import reconcile_at_boot
from drupe.persistence.db import Database
from drupe.settings import Settings
from drupe.streaming.checkpoints import Checkpointer
from drupe.streaming.listeners.trace_flush import TraceFlushListener
from drupe.streaming.manager import StreamManager
from drupe.streaming.terminal_writes import TerminalWriteRetrier, WritePolicy
from drupe.tasks.clock import SystemClock
from drupe.tools.builtins import ToolSettings, builtin_tools
from drupe.tools.mcp.config_file import load_mcp_servers
from drupe.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from drupe.cluster.log_writer import LogWriter
    from drupe.cluster.node import ClusterNode
    from drupe.cluster.ownership import LeaseOwnership
    from drupe.cluster.status import ClusterStatus
    from drupe.streaming.listeners.base import Listener
    from drupe.tools.mcp.catalog import McpCatalog


log = logging.getLogger(__name__)


@dataclass(slots=True, kw_only=True)
class Streams:
    """The stream layer and what outlives its streams' terminal work at shutdown."""

    retrier: TerminalWriteRetrier
    checkpointer: Checkpointer
    traces: TraceRecorder
    manager: StreamManager
    ownership: LeaseOwnership | None = None
    writer: LogWriter | None = None


def tool_registry(settings: Settings) -> ToolRegistry:
    tools = ToolRegistry()
    for entry in builtin_tools(ToolSettings(code_execution=settings.code_execution)):
        tools.register(entry)
    return tools


def context_window_of(models: ModelRegistry) -> Callable[[str], int | None]:
    def context_window(model_id: str) -> int | None:
        try:
            return models.resolve(model_id).context_window
        except ConfigError:
            return None

    return context_window


async def open_catalog(stack: AsyncExitStack, config_file: Path) -> McpCatalog | None:
    servers = load_mcp_servers(config_file)
    if not servers:
        return None
    from drupe.tools.mcp.catalog import McpCatalog  # the MCP SDK costs ~1 s to import

    return await stack.enter_async_context(McpCatalog(servers))


async def reconcile(db: Database, cluster: ClusterNode | None) -> tuple[anyio.Event, int]:
    """Boot reconciliation, before the first admission (dispatch waits on the event).

    Cluster mode: other nodes' rows are live; the takeover sweep finalizes only the rows whose
    owner's lease is dead (``drupe.cluster.takeover``), so the row reconcile is skipped. Task runs
    left ``running``: one process fails them all; a cluster node only its own earlier life's
    (a node that never comes back is swept by ``fail_running_of_gone_nodes``).
    """
    rows = 0 if cluster is not None else await reconcile_at_boot(db)
    if rows:
        log.warning("boot: %d answer(s) left pending by a crash were marked error", rows)
    db.schedules.node_id = cluster.node_id if cluster is not None else None
    runs = await db.schedules.fail_running(
        SystemClock().now(),
        "the server stopped",
        node_id=db.schedules.node_id,
        all_nodes=cluster is None,
    )
    if runs:
        log.warning("boot: %d task run(s) left running by a crash were marked failed", runs)
    reconciled = anyio.Event()
    reconciled.set()
    return reconciled, rows


async def open_streams(
    stack: AsyncExitStack,
    settings: Settings,
    cluster: ClusterNode | None,
    cluster_status: ClusterStatus | None,
) -> Streams:
    """The retrier, checkpointer and trace recorder (entered after the database and before the
    manager: they outlive every stream's terminal work at shutdown and stop before the database
    closes), cluster mode's leases and log writer (likewise), then the stream manager."""
    retrier = await stack.enter_async_context(
        TerminalWriteRetrier(WritePolicy.within(settings.stream.terminal_timeout))
    )
    checkpointer = await stack.enter_async_context(Checkpointer(settings.checkpoints))
    traces = await stack.enter_async_context(
        TraceRecorder(
            TraceStore(settings.data_dir / "traces") if settings.trace_store else None,
            otlp_exporter_from_env(),
        )
    )
    stream_listeners: list[Callable[[str], Listener]] = [
        lambda cid: TraceFlushListener(cid, traces.schedule)
    ]
    ownership: LeaseOwnership | None = None
    writer: LogWriter | None = None
    manager_ref: list[StreamManager] = []
    if cluster is not None:
        # The leases ask the manager whether a conversation is busy, and the manager's streams
        # write to the log the leases fence: the one cycle, broken by ``manager_ref``.
        ownership, writer = await open_cluster_parts(stack, cluster, settings, manager_ref)
        stream_listeners.append(writer.listener)
    manager = await stack.enter_async_context(
        StreamManager(settings.stream, tracer=traces.tracer, stream_listeners=stream_listeners)
    )
    manager_ref.append(manager)
    if cluster_status is not None:  # never removed: it must see the shutdown's aborts
        manager.add_status_observer(cluster_status.observe)
    return Streams(
        retrier=retrier,
        checkpointer=checkpointer,
        traces=traces,
        manager=manager,
        ownership=ownership,
        writer=writer,
    )
