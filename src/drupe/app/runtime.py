"""The running Drupe: ``Runtime`` (everything a surface needs, already started) and
``open_runtime(settings)``, which opens every part in order and closes them in reverse.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from drupe.admission.approval_service import ApprovalService
from drupe.admission.conversations import Conversations
from drupe.admission.dispatch import Dispatcher
from drupe.admission.ephemeral import EphemeralStore
from drupe.agent.models.config import config_path, load_model_config
from drupe.agent.models.overlay import LiveModelSettings
from drupe.agent.models.registry import ModelRegistry
from drupe.agent.runner import AgentRunner
from drupe.app.admission_parts import admission, open_drivers, session_host
from drupe.app.membership import Membership, open_membership
from drupe.app.streams import (
    open_catalog,
    open_streams,
    reconcile,
    runner_for,
    tool_registry,
)
from drupe.app.surfaces import ChannelParts, channels_over, task_service
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
    cluster: Membership
    """This process's place in the deployment: ``SingleProcess`` (the embedded default) or a
    cluster node (``drupe.app.cluster_membership``)."""
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
        membership = await open_membership(stack, settings)  # first in, last out
        catalog = await open_catalog(stack, config_file)
        tools = tool_registry(settings)
        client_tools = ClientToolBoard()
        runner = runner_for(agent, models, tools, catalog, client_tools)
        db = await stack.enter_async_context(
            open_database(settings.database_url, data_dir=settings.data_dir)
        )
        model_settings = await live_model_settings(models, db)
        meter = usage_meter(stack, db)
        reconciled, rows = await reconcile(db, membership)
        streams = await open_streams(stack, settings, membership, catalog)
        membership.follow(streams.manager.task_group, model_settings.follow)
        remotes = [remote_agent_tool(r) for r in load_remote_agents(config_file)]
        drivers = await open_drivers(stack, models, agent, db, remotes)
        ownership = membership.ownership
        host = session_host(streams.manager, drivers, db, ownership, streams.checkpointer)
        stack.push_async_callback(host.aclose)
        local = admission(
            models, db, streams, runner, host, drivers, reconciled, settings, ownership
        )
        conversations = await membership.open_port(stack, local, streams.manager, db)
        parts = ChannelParts(conversations, db, host, models, membership.receiving())
        channels = await open_channels(stack, config_file, parts)
        tasks = await stack.enter_async_context(
            task_service(settings, db, conversations, host, drivers, channels)
        )
        yield Runtime(
            settings=settings,
            authenticator=authenticator(settings, db),
            db=db,
            resources=Resources(db, enabled=settings.auth.enabled),
            manager=streams.manager,
            dispatcher=local.dispatcher,
            conversations=conversations,
            models=models,
            agent=agent,
            ephemeral=local.ephemeral,
            approvals=local.approvals,
            tools=tools,
            cluster=membership,
            mcp=catalog,
            client_tools=client_tools,
            drivers=drivers,
            sessions=host,
            channels=channels,
            tasks=tasks,
            traces=streams.traces,
            reconciled_rows=rows,
            checkpointer=streams.checkpointer,
            retrier=streams.retrier,
            gateway_usage=meter,
            model_settings=model_settings,
        )


async def live_model_settings(models: ModelRegistry, db: Database) -> LiveModelSettings:
    """config.toml's providers and models with the ones stored in the database over them, in
    ``models`` now."""
    model_settings = LiveModelSettings(models.config, models, db.provider_settings)
    await reseal_secrets(db)
    await model_settings.reload()
    return model_settings


async def reseal_secrets(db: Database) -> None:
    """Every stored secret sealed under the current secret key: the provider keys stored before
    sealing existed, and whatever a previous key (``DRUPE_SECRET_KEY_PREVIOUS``) sealed."""
    resealed = await db.provider_settings.reseal() + await db.auth_sessions.reseal_id_tokens()
    if resealed:
        log.info(
            "sealed %d stored secret(s) under the current secret key (%s)",
            resealed,
            db.secrets.source,
        )


def usage_meter(stack: AsyncExitStack, db: Database) -> UsageMeter:
    """The gateway's usage, written behind; closed after every surface, before the database."""
    meter = UsageMeter(db.gateway_usage)
    stack.push_async_callback(meter.aclose)
    return meter


def authenticator(settings: Settings, db: Database) -> Authenticator | None:
    """Who makes each request (None: auth is off, every request is the local admin)."""
    if not settings.auth.enabled:
        return None
    return Authenticator(db, cache_seconds=settings.auth.cache_seconds)


async def open_channels(
    stack: AsyncExitStack, config_file: Path, parts: ChannelParts
) -> ChannelService | None:
    """The IM channels of ``config_file`` (entered), or None when it configures none."""
    configs = load_channel_configs(config_file)
    if not configs:
        return None
    return await stack.enter_async_context(channels_over(parts, configs))
