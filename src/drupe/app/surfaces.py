"""The surfaces the runtime runs itself: the IM channels and the scheduled-task service (tasks
deliver through the channels).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING

from drupe.admission.turn_runner import model_validator
from drupe.channels.config import ChannelConfig
from drupe.channels.receiver import ReceiverLease
from drupe.channels.registry import AdapterRegistry, default_registry
from drupe.channels.service import ChannelDeps, ChannelService
from drupe.errors import ValidationError
from drupe.tasks.clock import SystemClock
from drupe.tasks.delivery import BufferedDelivery, DeliveryPort, DeliveryTarget, NoDelivery
from drupe.tasks.run import TaskDeps
from drupe.tasks.service import TaskService

if TYPE_CHECKING:
    from drupe.app.runtime import Runtime
    from drupe.channels.outbox import Clock


log = logging.getLogger(__name__)


def task_service(runtime: Runtime) -> TaskService:
    settings = runtime.settings
    assert runtime.sessions is not None and runtime.drivers is not None
    return TaskService(
        TaskDeps(
            db=runtime.db,
            conversations=runtime.conversations,
            host=runtime.sessions,
            drivers=runtime.drivers,
            delivery=task_delivery(runtime.channels),
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


def receiver_lease(runtime: Runtime) -> ReceiverLease | None:
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
        conversations=runtime.conversations,
        db=runtime.db,
        sessions=runtime.sessions,
        validate_model=model_validator(runtime.models),
        clock=clock,
        receiver_lease=receiver_lease(runtime),
    )
    if edit_interval is not None:
        deps.edit_interval = edit_interval
    if send_timeout is not None:
        deps.send_timeout = send_timeout
    return ChannelService(deps, configs, registry or default_registry())
