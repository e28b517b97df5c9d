"""The stream layer's openers: tools, the MCP catalog, the boot reconcile, and the retrier,
checkpointer, trace recorder, the membership's leases (a cluster node's leases and log writer)
and the stream manager, in the order their shutdown needs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from drupe.admission.turn_runner import TurnRunner, turn_runner
from drupe.agent.models.registry import ModelRegistry
from drupe.agent.runner import AgentRunner
from drupe.app.membership import Membership
from drupe.errors import ConfigError
from drupe.observability.trace_store import TraceRecorder, TraceStore, otlp_exporter_from_env
from drupe.persistence.db import Database
from drupe.settings import Settings
from drupe.streaming.checkpoints import Checkpointer
from drupe.streaming.listeners.trace_flush import TraceFlushListener
from drupe.streaming.manager import StreamManager
from drupe.streaming.terminal_writes import TerminalWriteRetrier, WritePolicy
from drupe.tasks.clock import SystemClock
from drupe.tools.builtins import ToolSettings, builtin_tools
from drupe.tools.client_tools import ClientToolBoard
from drupe.tools.mcp.config_file import load_mcp_servers
from drupe.tools.registry import ToolRegistry

if TYPE_CHECKING:
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


def runner_for(
    agent: AgentRunner,
    models: ModelRegistry,
    tools: ToolRegistry,
    catalog: McpCatalog | None,
    client_tools: ClientToolBoard,
) -> TurnRunner:
    """The agent loop behind the stream manager's runner seam, with its tools."""
    return turn_runner(
        agent,
        tools=tools,
        catalog=catalog,
        context_window=context_window_of(models),
        client_tools=client_tools,
    )


async def open_catalog(stack: AsyncExitStack, config_file: Path) -> McpCatalog | None:
    servers = load_mcp_servers(config_file)
    if not servers:
        return None
    from drupe.tools.mcp.catalog import McpCatalog  # the MCP SDK costs ~1 s to import

    return await stack.enter_async_context(McpCatalog(servers))


async def reconcile(db: Database, membership: Membership) -> tuple[anyio.Event, int]:
    """Boot reconciliation, before the first admission (dispatch waits on the event).

    Cluster mode: other nodes' rows are live; the takeover sweep finalizes only the rows whose
    owner's lease is dead (``drupe.cluster.takeover``), so the row reconcile is skipped. Task runs
    left ``running``: one process fails them all; a cluster node only its own earlier life's
    (a node that never comes back is swept by ``fail_running_of_gone_nodes``).
    """
    rows = await membership.reconcile_rows(db)
    if rows:
        log.warning("boot: %d answer(s) left pending by a crash were marked error", rows)
    db.schedules.node_id = membership.node_id
    runs = await db.schedules.fail_running(
        SystemClock().now(),
        "the server stopped",
        node_id=membership.node_id,
        all_nodes=membership.node_id is None,
    )
    if runs:
        log.warning("boot: %d task run(s) left running by a crash were marked failed", runs)
    reconciled = anyio.Event()
    reconciled.set()
    return reconciled, rows


async def open_streams(
    stack: AsyncExitStack,
    settings: Settings,
    membership: Membership,
    catalog: McpCatalog | None = None,
) -> Streams:
    """The retrier, checkpointer and trace recorder (entered after the database and before the
    manager: they outlive every stream's terminal work at shutdown and stop before the database
    closes), the membership's leases (a cluster node's leases and log writer: likewise), then the
    stream manager; then the MCP catalog's prewarm starts in the background (3 servers at a time:
    a dead server never delays a turn)."""
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
    # A cluster node's leases ask the manager whether a conversation is busy, and the manager's
    # streams write to the log the leases fence: the one cycle, broken by ``manager_ref``.
    manager_ref: list[StreamManager] = []
    stream_listeners += await membership.open_leases(stack, manager_ref)
    manager = await stack.enter_async_context(
        StreamManager(settings.stream, tracer=traces.tracer, stream_listeners=stream_listeners)
    )
    manager_ref.append(manager)
    membership.watch(manager)
    if catalog is not None:
        manager.task_group.start_soon(catalog.prewarm)
    return Streams(
        retrier=retrier,
        checkpointer=checkpointer,
        traces=traces,
        manager=manager,
    )
