"""The surfaces the runtime runs itself: the IM channels and the scheduled-task service (tasks
deliver through the channels).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from drupe.admission.turn_runner import model_validator
from drupe.channels.config import ChannelConfig
from drupe.channels.registry import AdapterRegistry, default_registry
from drupe.channels.service import ChannelDeps, ChannelService
from drupe.errors import ValidationError
from drupe.tasks.clock import SystemClock
from drupe.tasks.delivery import BufferedDelivery, DeliveryPort, DeliveryTarget, NoDelivery
from drupe.tasks.run import TaskDeps
from drupe.tasks.service import TaskService

if TYPE_CHECKING:
    from drupe.admission.conversations import Conversations
    from drupe.agent.models.registry import ModelRegistry
    from drupe.app.runtime import Runtime
    from drupe.channels.outbox import Clock
    from drupe.channels.receiver import Receiving
    from drupe.persistence.db import Database
    from drupe.sessions.drivers.registry import DriverRegistry
    from drupe.sessions.host import AgentSessionHost
    from drupe.settings import Settings


log = logging.getLogger(__name__)


def task_service(
    settings: Settings,
    db: Database,
    conversations: Conversations,
    host: AgentSessionHost,
    drivers: DriverRegistry,
    channels: ChannelService | None,
) -> TaskService:
    """The scheduled-task service (not started: enter it); tasks deliver through ``channels``."""
    return TaskService(
        TaskDeps(
            db=db,
            conversations=conversations,
            host=host,
            drivers=drivers,
            delivery=task_delivery(channels),
            clock=SystemClock(),
        ),
        run_scheduler=settings.run_scheduler,
        poll_interval=timedelta(seconds=settings.schedule_poll),
    )


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


@dataclass(frozen=True, slots=True)
class ChannelParts:
    """What the IM channels act through."""

    conversations: Conversations
    db: Database
    sessions: AgentSessionHost | None
    models: ModelRegistry
    receiving: Receiving


def channels_over(
    parts: ChannelParts,
    configs: list[ChannelConfig],
    *,
    registry: AdapterRegistry | None = None,
    clock: Clock | None = None,
    edit_interval: float | None = None,
    send_timeout: float | None = None,
) -> ChannelService:
    """The IM channels over the port, stores and session host (not started: enter it). The
    adapter registry is explicit: ``default_registry()`` unless given."""
    deps = ChannelDeps(
        conversations=parts.conversations,
        db=parts.db,
        sessions=parts.sessions,
        validate_model=model_validator(parts.models),
        clock=clock,
        receiving=parts.receiving,
    )
    if edit_interval is not None:
        deps.edit_interval = edit_interval
    if send_timeout is not None:
        deps.send_timeout = send_timeout
    return ChannelService(deps, configs, registry or default_registry())


def channel_service(
    runtime: Runtime,
    configs: list[ChannelConfig],
    *,
    registry: AdapterRegistry | None = None,
    clock: Clock | None = None,
    edit_interval: float | None = None,
    send_timeout: float | None = None,
) -> ChannelService:
    """Channels over a started runtime (tests and tools add channels to one this way)."""
    parts = ChannelParts(
        conversations=runtime.conversations,
        db=runtime.db,
        sessions=runtime.sessions,
        models=runtime.models,
        receiving=runtime.cluster.receiving(),
    )
    return channels_over(
        parts,
        configs,
        registry=registry,
        clock=clock,
        edit_interval=edit_interval,
        send_timeout=send_timeout,
    )
