"""The agent-runtime drivers, the session host, and admission (the dispatcher over its context
providers, the approval service) under the local ``Conversations`` port (a cluster node's port
wraps it: ``drupe.app.membership``).
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Sequence
from contextlib import AsyncExitStack

import anyio

from drupe.admission.access import AllowAll
from drupe.admission.agent_session import AgentSessionProvider
from drupe.admission.approval_service import ApprovalService
from drupe.admission.base import ContextProvider
from drupe.admission.dispatch import Dispatcher
from drupe.admission.ephemeral import EphemeralProvider, EphemeralStore
from drupe.admission.local_conversations import LocalConversations
from drupe.admission.ownership import Ownership
from drupe.admission.persistent import PersistentProvider
from drupe.admission.turn_runner import TurnRunner, model_validator
from drupe.agent.models.registry import ModelRegistry
from drupe.agent.runner import AgentRunner
from drupe.app.streams import Streams
from drupe.chunks.types import UIMessage
from drupe.identity.policy import OwnerPolicy
from drupe.ids import session_conversation_id
from drupe.persistence.db import Database
from drupe.sessions.drivers.inprocess.driver import InProcessDriver
from drupe.sessions.drivers.registry import DriverRegistry
from drupe.sessions.host import DEFAULT_IDLE_TTL, AgentSessionHost
from drupe.settings import Settings
from drupe.streaming.checkpoints import Checkpointer
from drupe.streaming.manager import StreamManager
from drupe.tools.base import ToolEntry

log = logging.getLogger(__name__)


def session_host(
    manager: StreamManager,
    drivers: DriverRegistry,
    db: Database,
    ownership: Ownership,
    checkpointer: Checkpointer | None = None,
) -> AgentSessionHost:
    """The agent-session host over the manager and stores; the drivers are registered by the
    caller (nothing registers itself). Its live answers are checkpointed by ``checkpointer``."""
    return AgentSessionHost(
        manager=manager,
        drivers=drivers,
        agents=db.agents,
        messages=db.messages,
        idle_ttl=DEFAULT_IDLE_TTL,
        fence_for=ownership.fence_for,
        checkpointer=checkpointer,
    )


def admission(
    models: ModelRegistry,
    db: Database,
    streams: Streams,
    runner: TurnRunner,
    host: AgentSessionHost,
    drivers: DriverRegistry,
    reconciled: anyio.Event,
    settings: Settings,
    ownership: Ownership,
) -> LocalConversations:
    """The dispatcher over the context providers, the approval service and the local
    ``Conversations`` port over them; ``ownership`` admits and fences (a cluster node's leases)."""
    manager = streams.manager
    ephemeral = EphemeralStore()
    dispatcher = Dispatcher(
        manager,
        providers(models, db, manager, runner, host, drivers, ephemeral, streams, ownership),
        reconciled=reconciled,
        ownership=ownership,
    )
    return LocalConversations(
        manager=manager,
        dispatcher=dispatcher,
        approvals=ApprovalService(dispatcher, db.messages, fence_for=ownership.fence_for),
        conversations=db.conversations,
        messages=db.messages,
        ephemeral=ephemeral,
        sessions=host,
        access=OwnerPolicy(db, ephemeral) if settings.auth.enabled else AllowAll(),
    )


def providers(
    models: ModelRegistry,
    db: Database,
    manager: StreamManager,
    runner: TurnRunner,
    host: AgentSessionHost,
    drivers: DriverRegistry,
    ephemeral: EphemeralStore,
    streams: Streams,
    ownership: Ownership,
) -> list[ContextProvider]:
    """The context providers, agent sessions first (the persistent provider is the catch-all
    and refuses ``agent-session:`` ids)."""
    validate = model_validator(models)
    return [
        AgentSessionProvider(host=host, messages=db.messages, drivers=drivers),
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
            checkpointer=streams.checkpointer,
            retrier=streams.retrier,
            fence_for=ownership.fence_for,
        ),
    ]


async def open_drivers(
    stack: AsyncExitStack,
    models: ModelRegistry,
    agent: AgentRunner,
    db: Database,
    extra_tools: Sequence[ToolEntry] = (),
) -> DriverRegistry:
    """Register the agent-runtime drivers explicitly (never as an import side effect);
    ``extra_tools`` (remote A2A agents) go to the in-process driver."""
    drivers = DriverRegistry()

    async def load_history(session_id: str) -> list[UIMessage]:
        rows = await db.messages.list_for_conversation(session_conversation_id(session_id))
        return [row.as_ui_message() for row in rows if row.status != "pending"]

    inprocess = await stack.enter_async_context(
        InProcessDriver(
            resolve_model=lambda model_id: models.resolve(model_id).model,
            load_history=load_history,
            runner=agent,
            context_window=lambda model_id: models.resolve(model_id).context_window,
            extra_tools=extra_tools,
        )
    )
    drivers.register(inprocess)
    if importlib.util.find_spec("claude_agent_sdk") is not None:
        from drupe.sessions.drivers.claude_code.driver import ClaudeCodeDriver

        drivers.register(await stack.enter_async_context(ClaudeCodeDriver()))
    return drivers
