"""Composition root: ``open_runtime(settings)`` wires every part of a running Drupe.

Start order: model registry -> database (migrations) -> boot reconciliation of crash leftovers
(every ``pending`` row becomes ``error`` BEFORE the first admission can run: dispatch waits on
the ``reconciled`` event; task runs left ``running`` become ``failed``, in cluster mode only
this node's own) -> terminal-write retrier and checkpointer -> stream manager -> dispatcher with
its context providers -> agent-session host -> task service (schedule runner, background runs;
its delivery port is ``NoDelivery`` until a channel layer replaces
``runtime.tasks.deps.delivery``). Shutdown runs in reverse: live streams are aborted and their
partials persisted, then the checkpointer and the retrier stop, then the database is closed.
Nothing here decides anything; it only connects parts.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import anyio

from drupe.admission.agent_session import AgentSessionProvider
from drupe.admission.approvals import ApprovalService
from drupe.admission.base import ContextProvider, TurnSpec
from drupe.admission.dispatch import Dispatcher
from drupe.admission.ephemeral import EphemeralProvider, EphemeralStore
from drupe.admission.persistent import PersistentProvider
from drupe.agent.models.config import config_path, load_model_config
from drupe.agent.models.registry import ModelRegistry
from drupe.agent.request import TurnRequest
from drupe.agent.runner import AgentRunner
from drupe.channels.config import ChannelConfig, load_channel_configs
from drupe.channels.receiver import ReceiverLease
from drupe.channels.registry import AdapterRegistry, default_registry
from drupe.channels.service import ChannelDeps, ChannelService
from drupe.chunks.types import Chunk, UIMessage
from drupe.errors import ConfigError, ValidationError
from drupe.observability.trace_store import TraceRecorder, TraceStore, otlp_exporter_from_env
from drupe.persistence.boot import reconcile_at_boot
from drupe.persistence.db import Database, open_database
from drupe.sessions.drivers.inprocess.driver import InProcessDriver
from drupe.sessions.drivers.registry import DriverRegistry
from drupe.sessions.host import DEFAULT_IDLE_TTL, AgentSessionHost
from drupe.settings import Settings
from drupe.streaming.checkpoints import Checkpointer
from drupe.streaming.listeners.trace_flush import TraceFlushListener
from drupe.streaming.manager import StreamManager
from drupe.streaming.terminal_writes import TerminalWriteRetrier, WritePolicy
from drupe.tasks.clock import SystemClock
from drupe.tasks.delivery import BufferedDelivery, DeliveryPort, DeliveryTarget, NoDelivery
from drupe.tasks.run import TaskDeps
from drupe.tasks.service import TaskService
from drupe.tools.builtins import ToolSettings, builtin_tools
from drupe.tools.mcp.config_file import load_mcp_servers
from drupe.tools.registry import ToolRegistry
from drupe.tools.request import ToolRequest, prepare_tools

if TYPE_CHECKING:
    from drupe.cluster.chat import ClusterChat
    from drupe.cluster.log_writer import LogWriter
    from drupe.cluster.node import ClusterNode
    from drupe.cluster.ownership import LeaseOwnership
    from drupe.cluster.status import ClusterStatus
    from drupe.streaming.listeners.base import Listener
    from drupe.streaming.listeners.channel_outbox import Clock
    from drupe.tools.mcp.catalog import McpCatalog

__all__ = [
    "Runtime",
    "channel_service",
    "open_runtime",
    "task_delivery",
    "turn_runner",
]

log = logging.getLogger(__name__)


@dataclass(slots=True, kw_only=True)
class Runtime:
    """Everything a surface (HTTP edge, CLI, channels) needs, already started."""

    settings: Settings
    db: Database
    manager: StreamManager
    dispatcher: Dispatcher
    models: ModelRegistry
    agent: AgentRunner
    ephemeral: EphemeralStore
    approvals: ApprovalService
    tools: ToolRegistry
    mcp: McpCatalog | None = None
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
    cluster_chat: ClusterChat | None = None
    """Cluster mode: chat admission, commands and subscriptions across nodes."""
    cluster_status: ClusterStatus | None = None
    """Every node's conversation statuses through Redis (cluster mode only)."""


def turn_runner(agent: AgentRunner, **kwargs: Any) -> TurnRunner:
    """Adapt the agent loop to the stream manager's runner seam (``TurnSpec -> chunks``)."""
    return TurnRunner(agent, **kwargs)


class TurnRunner:
    """``TurnSpec`` (streaming's view of a turn) -> ``TurnRequest`` (the agent loop's).

    Tools come from the registry and the MCP catalog's cache through ``prepare_tools`` (never a
    connect on the turn path), with the cost gate applied for the model's context window.
    """

    def __init__(
        self,
        agent: AgentRunner,
        *,
        tools: ToolRegistry | None = None,
        catalog: McpCatalog | None = None,
        context_window: Callable[[str], int | None] = lambda model_id: None,
    ) -> None:
        self.agent = agent
        self.tools = tools if tools is not None else ToolRegistry()
        self.catalog = catalog
        self.context_window = context_window

    def __call__(self, spec: TurnSpec) -> AsyncIterator[Chunk]:
        exposition = prepare_tools(
            self.tools,
            self.catalog,
            ToolRequest(context_window=self.context_window(spec.model_id)),
        )
        request = TurnRequest(
            conversation_id=spec.conversation_id,
            message_id=spec.message_id,
            model_id=spec.model_id,
            messages=list(spec.messages),
            system=exposition.prompt_section,
            tools=exposition.advertised,
            steer_pending=spec.steer_pending,
            wrap_last_user_as_steer=spec.is_steer,
        )
        return self.agent.stream(request)


def model_validator(models: ModelRegistry) -> ModelValidator:
    return ModelValidator(models)


class ModelValidator:
    """Refuses unknown or unusable model ids before anything is written."""

    def __init__(self, models: ModelRegistry) -> None:
        self.models = models

    def __call__(self, model_id: str) -> None:
        try:
            self.models.resolve(model_id)
        except ConfigError as err:
            raise ValidationError(str(err)) from err


@asynccontextmanager
async def open_runtime(settings: Settings | None = None) -> AsyncIterator[Runtime]:
    """Start Drupe's runtime; on exit, stop it in reverse order."""
    settings = settings or Settings.from_env()
    config_file = settings.config_path or config_path()
    models = ModelRegistry(load_model_config(settings.config_path))
    mcp_servers = load_mcp_servers(config_file)
    agent = AgentRunner(lambda model_id: models.resolve(model_id).model)
    tools = ToolRegistry()
    for entry in builtin_tools(ToolSettings(code_execution=settings.code_execution)):
        tools.register(entry)

    def context_window(model_id: str) -> int | None:
        try:
            return models.resolve(model_id).context_window
        except ConfigError:
            return None

    reconciled = anyio.Event()
    settings.check()
    async with AsyncExitStack() as stack:
        cluster: ClusterNode | None = None
        if settings.cluster.enabled:
            from drupe.cluster.node import ClusterNode

            cluster = await stack.enter_async_context(ClusterNode(settings.cluster))
            log.info("cluster mode: node %s", cluster.node_id)
        cluster_status = await _open_cluster_status(stack, cluster, settings)
        catalog: McpCatalog | None = None
        if mcp_servers:
            from drupe.tools.mcp.catalog import McpCatalog  # the MCP SDK costs ~1 s to import

            catalog = await stack.enter_async_context(McpCatalog(mcp_servers))
        runner = turn_runner(agent, tools=tools, catalog=catalog, context_window=context_window)
        db = await stack.enter_async_context(
            open_database(settings.database_url, data_dir=settings.data_dir)
        )
        # Cluster mode: other nodes' rows are live; the takeover sweep finalizes only the rows
        # whose owner's lease is dead (drupe.cluster.chat), so the boot reconcile is skipped.
        rows = 0 if cluster is not None else await reconcile_at_boot(db)
        if rows:
            log.warning("boot: %d answer(s) left pending by a crash were marked error", rows)
        # Task runs left ``running``: one process fails them all; a cluster node only its own
        # earlier life's (other nodes' runs may be live; a node that never comes back is swept
        # by ``fail_running_of_gone_nodes``, whoever knows the live nodes).
        db.schedules.node_id = cluster.node_id if cluster is not None else None
        runs = await db.schedules.fail_running(
            SystemClock().now(),
            "the server stopped",
            node_id=db.schedules.node_id,
            all_nodes=cluster is None,
        )
        if runs:
            log.warning("boot: %d task run(s) left running by a crash were marked failed", runs)
        reconciled.set()
        # Entered after the database and before the manager: they outlive every stream's
        # terminal work at shutdown, and stop before the database closes.
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
        if cluster is not None:
            # Entered before the manager: leases and the log writer outlive every stream's
            # terminal work at shutdown.
            ownership, writer = await _open_cluster_parts(stack, cluster, settings, lambda: manager)
            stream_listeners.append(writer.listener)
        fence_for = ownership.fence_for if ownership is not None else _unfenced
        manager = await stack.enter_async_context(
            StreamManager(settings.stream, tracer=traces.tracer, stream_listeners=stream_listeners)
        )
        if cluster_status is not None:  # never removed: it must see the shutdown's aborts
            manager.add_status_observer(cluster_status.observe)
        if catalog is not None:
            # Boot prewarm (3 at a time) in the background: a dead server never delays a turn.
            manager.task_group.start_soon(catalog.prewarm)
        ephemeral = EphemeralStore()
        validate = model_validator(models)
        providers: list[ContextProvider] = [
            EphemeralProvider(
                ephemeral,
                runner=runner,
                default_model=models.default_model_id,
                validate_model=validate,
            ),
            PersistentProvider(
                conversations=db.conversations,
                messages=db.messages,
                runner=runner,
                default_model=models.default_model_id,
                validate_model=validate,
                has_pending_steer=manager.has_pending_steer,
                checkpointer=checkpointer,
                retrier=retrier,
                fence_for=fence_for,
            ),
        ]
        dispatcher = Dispatcher(manager, providers, reconciled=reconciled, ownership=ownership)
        drivers = await _open_drivers(stack, models, agent, db)
        runtime = Runtime(
            settings=settings,
            db=db,
            manager=manager,
            dispatcher=dispatcher,
            models=models,
            agent=agent,
            ephemeral=ephemeral,
            approvals=ApprovalService(dispatcher, db.messages, fence_for=fence_for),
            tools=tools,
            mcp=catalog,
            drivers=drivers,
            traces=traces,
            reconciled_rows=rows,
            checkpointer=checkpointer,
            retrier=retrier,
            cluster=cluster,
            cluster_status=cluster_status,
        )
        runtime.sessions = install_sessions(runtime, drivers)
        stack.push_async_callback(runtime.sessions.aclose)
        if cluster is not None and ownership is not None:
            from drupe.cluster.chat import ClusterChat

            runtime.cluster_chat = await stack.enter_async_context(
                ClusterChat(
                    cluster,
                    ownership,
                    dispatcher=dispatcher,
                    manager=manager,
                    approvals=runtime.approvals,
                    messages=db.messages,
                    sessions=lambda: runtime.sessions,
                    settle=cluster_status.settle if cluster_status is not None else None,
                    schedules=db.schedules,
                )
            )
        channel_configs = load_channel_configs(config_file)
        if channel_configs:
            runtime.channels = await stack.enter_async_context(
                channel_service(runtime, channel_configs)
            )
        runtime.tasks = await stack.enter_async_context(
            TaskService(
                TaskDeps(
                    db=db,
                    manager=manager,
                    dispatcher=dispatcher,
                    host=runtime.sessions,
                    drivers=drivers,
                    delivery=task_delivery(runtime.channels),
                    clock=SystemClock(),
                ),
                run_scheduler=settings.run_scheduler,
                poll_interval=timedelta(seconds=settings.schedule_poll),
            )
        )
        yield runtime


def _unfenced(conversation_id: str) -> int | None:
    return None


async def _open_cluster_status(
    stack: AsyncExitStack, cluster: ClusterNode | None, settings: Settings
) -> ClusterStatus | None:
    """Cluster mode: share this node's statuses. Entered before the stream manager, so it
    leaves after it and writes the shutdown's aborts before the node closes Redis."""
    if cluster is None:
        return None
    from drupe.cluster.status import ClusterStatus

    status = ClusterStatus(cluster, max_records=settings.stream.max_status_records)
    return await stack.enter_async_context(status)


def task_delivery(channels: ChannelService | None) -> DeliveryPort:
    """Where scheduled tasks deliver: one message per answer (and each failure notice) to each
    subscribed chat through the IM channels' outboxes; ``NoDelivery`` when no channel is set up.
    A chat of a channel that is not configured is skipped with a warning."""
    if channels is None:
        return NoDelivery()

    async def send(target: DeliveryTarget, text: str) -> None:
        try:
            channels.deliver(target.channel, target.chat, text)
        except ValidationError as err:
            log.warning("task delivery to %s/%s skipped: %s", target.channel, target.chat, err)

    return BufferedDelivery(send)


def _receiver_lease(runtime: Runtime) -> ReceiverLease | None:
    """Cluster mode: the lease that picks the one node receiving a single-connection channel."""
    node = runtime.cluster
    if node is None:
        return None
    from drupe.cluster.receiver import RedisReceiverLease

    return RedisReceiverLease(node.lease, node.node_id)


def channel_service(
    runtime: Runtime,
    configs: list[ChannelConfig],
    *,
    registry: AdapterRegistry | None = None,
    clock: Clock | None = None,
    edit_interval: float | None = None,
    send_timeout: float | None = None,
) -> ChannelService:
    """The IM channels over the runtime's dispatcher, stores and session host (not started:
    enter it). The adapter registry is explicit: ``default_registry()`` unless given."""
    deps = ChannelDeps(
        dispatcher=runtime.dispatcher,
        manager=runtime.manager,
        db=runtime.db,
        approvals=runtime.approvals,
        sessions=runtime.sessions,
        validate_model=model_validator(runtime.models),
        clock=clock,
        cluster=runtime.cluster_chat,
        receiver_lease=_receiver_lease(runtime),
    )
    if edit_interval is not None:
        deps.edit_interval = edit_interval
    if send_timeout is not None:
        deps.send_timeout = send_timeout
    return ChannelService(deps, configs, registry or default_registry())


def install_sessions(
    runtime: Runtime, drivers: DriverRegistry, *, idle_ttl: float = DEFAULT_IDLE_TTL
) -> AgentSessionHost:
    """Build the agent-session host over the runtime's manager and stores, and put its provider
    FIRST in the dispatcher (the persistent provider is the catch-all and refuses
    ``agent-session:`` ids). The drivers are registered by the caller; nothing registers itself."""
    host = AgentSessionHost(
        manager=runtime.manager,
        drivers=drivers,
        agents=runtime.db.agents,
        messages=runtime.db.messages,
        idle_ttl=idle_ttl,
        fence_for=runtime.dispatcher.ownership.fence_for,
        checkpointer=runtime.checkpointer,
    )
    runtime.dispatcher.providers.insert(
        0, AgentSessionProvider(host=host, messages=runtime.db.messages, drivers=drivers)
    )
    return host


async def _open_cluster_parts(
    stack: AsyncExitStack,
    cluster: ClusterNode,
    settings: Settings,
    manager: Callable[[], StreamManager],
) -> tuple[LeaseOwnership, LogWriter]:
    """This node's leases (busy while a stream, even a finished one in its grace period, or a
    queued steer needs it; a lost lease aborts the local stream) and its chunk-log writer."""
    from drupe.cluster.log_writer import LogWriter
    from drupe.cluster.ownership import LeaseOwnership

    def busy(conversation_id: str) -> bool:
        current = manager()
        return current.get(conversation_id) is not None or current.has_pending_steer(
            conversation_id
        )

    def on_lost(conversation_id: str) -> None:
        manager().abort(conversation_id, "lease-lost")

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


async def _open_drivers(
    stack: AsyncExitStack, models: ModelRegistry, agent: AgentRunner, db: Database
) -> DriverRegistry:
    """Register the agent-runtime drivers explicitly (never as an import side effect)."""
    drivers = DriverRegistry()

    async def load_history(session_id: str) -> list[UIMessage]:
        rows = await db.messages.list_for_conversation(f"agent-session:{session_id}")
        return [row.as_ui_message() for row in rows if row.status != "pending"]

    inprocess = await stack.enter_async_context(
        InProcessDriver(
            resolve_model=lambda model_id: models.resolve(model_id).model,
            load_history=load_history,
            runner=agent,
            context_window=lambda model_id: models.resolve(model_id).context_window,
        )
    )
    drivers.register(inprocess)
    if importlib.util.find_spec("claude_agent_sdk") is not None:
        from drupe.sessions.drivers.claude_code.driver import ClaudeCodeDriver

        drivers.register(await stack.enter_async_context(ClaudeCodeDriver()))
    return drivers
