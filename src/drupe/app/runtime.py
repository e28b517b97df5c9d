"""The running Drupe: ``Runtime`` (everything a surface needs, already started) and
``open_runtime(settings)``, which opens every part in order and closes them in reverse.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from drupe.admission.approval_service import ApprovalService
from drupe.admission.conversations import Conversations
from drupe.admission.dispatch import Dispatcher
from drupe.admission.ephemeral import EphemeralStore
from drupe.admission.ownership import LocalOwnership
from drupe.admission.turn_runner import turn_runner
from drupe.agent.models.config import config_path, load_model_config
from drupe.agent.models.overlay import LiveModelSettings
from drupe.agent.models.registry import ModelRegistry
from drupe.agent.runner import AgentRunner
from drupe.app.admission_parts import admission, open_conversations, open_drivers, session_host
from drupe.app.cluster_parts import open_cluster_node, open_cluster_status
from drupe.app.streams import (
    context_window_of,
    open_catalog,
    open_streams,
    reconcile,
    tool_registry,
)
from drupe.app.surfaces import channel_service, task_service
from drupe.channels.config import load_channel_configs
from drupe.channels.service import ChannelService
from drupe.identity.authenticator import Authenticator
from drupe.identity.resources import Resources
from drupe.observability.trace_store import TraceRecorder
from drupe.persistence.db import Database, open_database
from drupe.persistence.gateway_usage_meter import UsageMeter
from drupe.sessions.drivers.registry import DriverRegistry
from drupe.sessions.host import AgentSessionHost
from drupe.settings import Settings
from drupe.streaming.checkpoints import Checkpointer
from drupe.streaming.manager import StreamManager
from drupe.streaming.terminal_writes import TerminalWriteRetrier
from drupe.tasks.service import TaskService
from drupe.tools.a2a.config import load_remote_agents
from drupe.tools.a2a.remote import remote_agent_tool
from drupe.tools.client_tools import ClientToolBoard
from drupe.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from drupe.cluster.node import ClusterNode
    from drupe.cluster.takeover import Takeover
    from drupe.tools.mcp.catalog import McpCatalog


log = logging.getLogger(__name__)


@dataclass(slots=True, kw_only=True)
class Runtime:
    """Everything a surface (HTTP edge, CLI, channels) needs, already started."""

    settings: Settings
    db: Database
    manager: StreamManager
    dispatcher: Dispatcher
    conversations: Conversations
    """The port every surface acts on conversations through (local, or the cluster's)."""
    models: ModelRegistry
    agent: AgentRunner
    ephemeral: EphemeralStore
    approvals: ApprovalService
    tools: ToolRegistry
    mcp: McpCatalog | None = None
    client_tools: ClientToolBoard | None = None
    """Tools clients declared per conversation (AG-UI's ``RunAgentInput.tools``)."""
    drivers: DriverRegistry | None = None
    sessions: AgentSessionHost | None = None
    channels: ChannelService | None = None
    tasks: TaskService | None = None
    traces: TraceRecorder | None = None
    reconciled_rows: int = 0
    checkpointer: Checkpointer | None = None
    retrier: TerminalWriteRetrier | None = None
    cluster: ClusterNode | None = None
    """This process's cluster membership (None: single-process, the embedded default)."""
    cluster_takeover: Takeover | None = None
    """Cluster mode: this node's sweep that settles the turns of lost owners."""
    authenticator: Authenticator | None = None
    """Who makes each request (None: auth is off, every request is the local admin)."""
    resources: Resources | None = None
    """Owned resources other than conversations, looked up with access decided (identity)."""
    gateway_usage: UsageMeter | None = None
    """Gateway requests and tokens, written behind to ``db.gateway_usage`` (None: not metered)."""
    model_settings: LiveModelSettings | None = None
    """config.toml plus the providers stored in the database, behind ``models`` (issue 22)."""


@asynccontextmanager
async def open_runtime(settings: Settings | None = None) -> AsyncIterator[Runtime]:
    """Start Drupe's runtime; on exit, stop it in reverse order."""
    settings = (settings or Settings.from_env()).with_file_tables()
    settings.check()
    config_file = settings.config_path or config_path()
    models = ModelRegistry(load_model_config(settings.config_path))
    agent = AgentRunner(lambda model_id: models.resolve(model_id).model)
    async with AsyncExitStack() as stack:
        cluster = await open_cluster_node(stack, settings)
        cluster_status = await open_cluster_status(stack, cluster, settings)
        catalog = await open_catalog(stack, config_file)
        tools = tool_registry(settings)
        client_tools = ClientToolBoard()
        runner = turn_runner(
            agent,
            tools=tools,
            catalog=catalog,
            context_window=context_window_of(models),
            client_tools=client_tools,
        )
        db = await stack.enter_async_context(
            open_database(settings.database_url, data_dir=settings.data_dir)
        )
        model_settings = LiveModelSettings(models.config, models, db.provider_settings)
        await model_settings.reload()
        meter = UsageMeter(db.gateway_usage)
        stack.push_async_callback(meter.aclose)  # after every surface, before the database
        reconciled, rows = await reconcile(db, cluster)
        streams = await open_streams(stack, settings, cluster, cluster_status)
        manager = streams.manager
        if catalog is not None:
            # Boot prewarm (3 at a time) in the background: a dead server never delays a turn.
            manager.task_group.start_soon(catalog.prewarm)
        if cluster is not None:
            manager.task_group.start_soon(model_settings.follow)
        remotes = [remote_agent_tool(r) for r in load_remote_agents(config_file)]
        drivers = await open_drivers(stack, models, agent, db, remotes)
        host = session_host(
            manager, drivers, db, streams.ownership or LocalOwnership(), streams.checkpointer
        )
        stack.push_async_callback(host.aclose)
        local = admission(models, db, streams, runner, host, drivers, reconciled, settings)
        takeover, conversations = await open_conversations(
            stack, settings, local, streams, cluster, cluster_status, db
        )
        runtime = Runtime(
            settings=settings,
            authenticator=(
                Authenticator(db, cache_seconds=settings.auth.cache_seconds)
                if settings.auth.enabled
                else None
            ),
            db=db,
            resources=Resources(db, enabled=settings.auth.enabled),
            manager=manager,
            dispatcher=local.dispatcher,
            conversations=conversations,
            models=models,
            agent=agent,
            ephemeral=local.ephemeral,
            approvals=local.approvals,
            tools=tools,
            mcp=catalog,
            client_tools=client_tools,
            drivers=drivers,
            sessions=host,
            traces=streams.traces,
            reconciled_rows=rows,
            checkpointer=streams.checkpointer,
            retrier=streams.retrier,
            cluster=cluster,
            cluster_takeover=takeover,
            gateway_usage=meter,
            model_settings=model_settings,
        )
        channel_configs = load_channel_configs(config_file)
        if channel_configs:
            runtime.channels = await stack.enter_async_context(
                channel_service(runtime, channel_configs)
            )
        runtime.tasks = await stack.enter_async_context(task_service(runtime))
        yield runtime
