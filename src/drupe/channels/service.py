"""``ChannelService``: runs the configured channels and owns every channel task.

Contract:

* ``async with ChannelService(deps, configs, registry)`` builds one adapter per configured
  channel through the explicit ``AdapterRegistry`` and runs each (``adapter.run``) in the
  service's task group. A channel that fails to connect records its error (``state = error``)
  and never stops the runtime or another channel.
* Inbound: each channel's ``ChannelInbox`` (never blocks) drops redeliveries (the last 4,096
  event ids), refuses chats that are not allowed (one reply per user per 10 minutes, with the
  ids to allow; nothing is dispatched or stored), applies the per-chat rate limit, and queues
  the item on the chat's ``ChatWorker`` (one task per active chat, started on first use).
* Approvals: one ``ApprovalBoard`` for every channel: a decision (a chat's press, or the
  tool's output or denial reaching any chat's listener) settles the buttons of every chat
  that offered the approval; a press refused by the allow-list is answered "not allowed".
* Outbound: one ``ChatOutbox`` pump and one ``ChannelListener`` per chat; the delivery ledger is
  the database's ``ChannelStore`` (at-most-once terminal messages across restarts). At start,
  answers a previous process left ``live`` get their terminal text once (from the stored row).
* ``deliver(channel_id, chat_id, text, delivery_id=...)`` and ``listener(channel_id, chat_id)``
  implement the ``ChatDelivery`` port for other producers (scheduled tasks): queue one message
  to a chat, at most once per ``delivery_id``, or stream a run into it.
* ``status()``: each channel's public config, state, last error and bound chats; never a
  secret.

One channel (its inbox, per-chat parts and adapter lifecycle) is a ``ChannelRuntime``
(``channel_runtime``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from drupe.channels.approvals import ApprovalBoard, Verdict
from drupe.channels.channel_runtime import ChannelDeps, ChannelRuntime
from drupe.channels.delivery_listener import ChannelListener
from drupe.channels.logs import install_secret_filter
from drupe.channels.outbox import Clock, MonotonicClock
from drupe.channels.registry import UnavailableAdapter
from drupe.errors import ValidationError
from drupe.lifetimes import TaskOwner

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from drupe.channels.config import ChannelConfig
    from drupe.channels.registry import AdapterRegistry

__all__ = ["ChannelDeps", "ChannelService"]

log = logging.getLogger(__name__)

CONNECT_WAIT = 10.0


class ChannelService(TaskOwner):
    def __init__(
        self,
        deps: ChannelDeps,
        configs: Sequence[ChannelConfig],
        registry: AdapterRegistry,
    ) -> None:
        self.deps = deps
        self.configs = list(configs)
        self.registry = registry
        self.clock: Clock = deps.clock or MonotonicClock()
        self.channels: dict[str, ChannelRuntime] = {}
        self.approvals = ApprovalBoard(self._settle)
        self.started = False

    def _settle(self, channel_id: str, chat_id: str, approval_id: str, verdict: Verdict) -> None:
        channel = self.channels.get(channel_id)
        if channel is not None:
            channel.outbox(chat_id).settle(approval_id, channel.redact(verdict.line()))

    async def _start_tasks(self, group: anyio.abc.TaskGroup) -> None:
        for config in self.configs:
            try:
                adapter = self.registry.create(config)
            except Exception as err:
                install_secret_filter(v for v in config.secrets.values() if v)
                log.warning("channel %s cannot start: %s", config.id, err)
                channel = ChannelRuntime(self, config, UnavailableAdapter(config))
                channel.disconnected(str(err) or type(err).__name__)
                self.channels[config.id] = channel
                continue
            channel = ChannelRuntime(self, config, adapter)
            self.channels[config.id] = channel
            group.start_soon(channel.serve)
        # Bounded: a platform that does not answer never holds up the server's start.
        with anyio.move_on_after(CONNECT_WAIT):
            for channel in self.channels.values():
                await channel.settled.wait()
        for channel in self.channels.values():
            if channel.state == "connected":  # the adapter can send: finish interrupted answers
                channel.recovered = True
                await channel.recover()
        self.started = True

    def get(self, channel_id: str) -> ChannelRuntime:
        channel = self.channels.get(channel_id)
        if channel is None:
            raise ValidationError(f"unknown channel {channel_id!r}")
        return channel

    async def handle_http(self, channel_id: str, path: str, request: Request) -> Response:
        return await self.get(channel_id).adapter.handle_http(request, path)

    def deliver(
        self, channel_id: str, chat_id: str, text: str, *, delivery_id: str | None = None
    ) -> str:
        """Queue ``text`` to one chat, at most once per ``delivery_id``; returns that id.

        Never blocks: the chat's outbox sends it in FIFO order after what is already queued.
        """
        channel = self.get(channel_id)
        key = delivery_id or uuid.uuid4().hex
        outbox = channel.outbox(chat_id)
        outbox.begin(key, None)
        outbox.terminal(key, channel.redact(text))
        return key

    def listener(self, channel_id: str, chat_id: str) -> ChannelListener:
        """The chat's one ``ChannelListener`` (see ``ChatDelivery``)."""
        return self.get(channel_id).listener(chat_id)

    async def status(self) -> list[dict[str, Any]]:
        out = []
        for channel in self.channels.values():
            bindings = await self.deps.db.channels.bindings(channel.config.id)
            out.append(
                {
                    **channel.public(),
                    "chats": [
                        {
                            "chatId": b.chat_id,
                            "conversationId": b.conversation_id,
                            "target": b.target,
                        }
                        for b in bindings
                    ],
                }
            )
        return out
