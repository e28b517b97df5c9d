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
"""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from drupe.channels.approval_press import HEADLESS, answer_press
from drupe.channels.approvals import ApprovalBoard, Verdict
from drupe.channels.chat_commands import refusal_text
from drupe.channels.chat_worker import ChatContext, ChatWorker
from drupe.channels.contract import ButtonPress, ChannelAdapter, Inbound
from drupe.channels.delivery_listener import ChannelListener
from drupe.channels.guard import RateWindow, admitted
from drupe.channels.logs import install_secret_filter
from drupe.channels.outbox import (
    DEFAULT_EDIT_INTERVAL,
    DEFAULT_SEND_TIMEOUT,
    ChatOutbox,
    Clock,
    MonotonicClock,
)
from drupe.channels.receiver import ReceiverLease, serve_single_receiver
from drupe.channels.registry import UnavailableAdapter
from drupe.channels.text_shaping import error_text, redact, stopped_text
from drupe.errors import ValidationError
from drupe.lifetimes import TaskOwner

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from drupe.admission.conversations import Conversations
    from drupe.channels.config import ChannelConfig
    from drupe.channels.registry import AdapterRegistry
    from drupe.persistence.db import Database
    from drupe.sessions.host import AgentSessionHost

__all__ = ["ChannelDeps", "ChannelService"]

log = logging.getLogger(__name__)

_SEEN_EVENTS = 4096
_REFUSAL_PERIOD = 600.0
CONNECT_WAIT = 10.0
_REFUSALS_PER_MINUTE = 30
"""Refusal replies per channel per minute, whoever asks (a flood of strangers stays cheap)."""


@dataclass(slots=True, kw_only=True)
class ChannelDeps:
    conversations: Conversations
    db: Database
    sessions: AgentSessionHost | None
    validate_model: Callable[[str], None]
    clock: Clock | None = None
    edit_interval: float = DEFAULT_EDIT_INTERVAL
    send_timeout: float = DEFAULT_SEND_TIMEOUT
    receiver_lease: ReceiverLease | None = None
    """Cluster mode: which node receives a single-connection channel (``receiver.py``)."""


class ChannelRuntime:
    """One configured channel: its adapter, chats and state."""

    def __init__(self, service: ChannelService, config: ChannelConfig, adapter: ChannelAdapter):
        self.service = service
        self.config = config
        self.adapter = adapter
        self.state = "starting"
        self.role: str | None = None
        """Cluster mode, single-connection channels: ``receiver`` or ``standby``."""
        self.last_error: str | None = None
        self.workers: dict[str, ChatWorker] = {}
        self.outboxes: dict[str, ChatOutbox] = {}
        self.listeners: dict[str, ChannelListener] = {}
        self.refused = 0
        self.settled = anyio.Event()
        """Set once the adapter connected or failed (start waits for it, bounded)."""
        self.recovered = False
        self._seen: OrderedDict[str, None] = OrderedDict()
        clock = service.clock
        self._rate = RateWindow(config.rate_limit, 60.0, clock.now)
        self._refusals = RateWindow(1, _REFUSAL_PERIOD, clock.now)
        self._refusal_budget = RateWindow(_REFUSALS_PER_MINUTE, 60.0, clock.now)
        # Every configured channel's secrets, not only this one's: a chat must never see
        # another channel's token either (issue 23.8).
        self._secrets = tuple(v for other in service.configs for v in other.secrets.values() if v)
        install_secret_filter(self._secrets)

    # --- the inbox (called by the adapter; never blocks) ---------------------------------------

    def connected(self) -> None:
        self.state = "connected"
        self.settled.set()
        if self.service.started and not self.recovered:  # connected after the start wait
            self.recovered = True
            self.service.task_group.start_soon(self.recover)

    def disconnected(self, error: str | None) -> None:
        self.state = "error" if error else "stopped"
        if error:
            self.record_error(error)
        self.settled.set()

    def record_error(self, message: str) -> None:
        self.last_error = self.redact(message)

    def redact(self, text: str) -> str:
        return redact(text, self._secrets)

    def _fresh(self, event_id: str | None) -> bool:
        if event_id is None:
            return True
        if event_id in self._seen:
            return False
        self._seen[event_id] = None
        if len(self._seen) > _SEEN_EVENTS:
            self._seen.popitem(last=False)
        return True

    def message(self, inbound: Inbound) -> None:
        if not self._fresh(inbound.event_id):
            log.info("channel %s: redelivery %s ignored", self.config.id, inbound.event_id)
            return
        if not admitted(self.config, inbound.user_id, inbound.chat_id):
            self.refused += 1
            if self._refusals.allow(
                f"{inbound.chat_id}:{inbound.user_id}"
            ) and self._refusal_budget.allow("all"):
                self.outbox(inbound.chat_id).notice(
                    refusal_text(self.config.id, inbound.user_id, inbound.chat_id)
                )
            return
        if not self._rate.allow(inbound.chat_id):
            if self._refusals.allow(f"rate:{inbound.chat_id}"):
                self.outbox(inbound.chat_id).notice(
                    f"⚠️ Too many messages: at most {self.config.rate_limit} per minute."
                )
            return
        if not self.worker(inbound.chat_id).put(inbound):
            self.outbox(inbound.chat_id).notice("⚠️ Too many queued messages; this one was dropped.")

    def button(self, press: ButtonPress) -> None:
        if not self._fresh(press.event_id):
            return
        if not admitted(self.config, press.user_id, press.chat_id):
            self.refused += 1
            self.service.task_group.start_soon(
                answer_press, self.adapter, press, "You are not allowed to decide this.", 5.0
            )
            return
        self.worker(press.chat_id).put(press)

    # --- per-chat parts -------------------------------------------------------------------------

    def outbox(self, chat_id: str) -> ChatOutbox:
        outbox = self.outboxes.get(chat_id)
        if outbox is None:
            service = self.service
            outbox = ChatOutbox(
                self.adapter,
                channel_id=self.config.id,
                chat_id=chat_id,
                clock=service.clock,
                ledger=service.deps.db.channels,
                edit_interval=service.deps.edit_interval,
                send_timeout=service.deps.send_timeout,
                on_error=self.record_error,
            )
            self.outboxes[chat_id] = outbox
            service.task_group.start_soon(outbox.run)
        return outbox

    def listener(self, chat_id: str) -> ChannelListener:
        listener = self.listeners.get(chat_id)
        if listener is None:
            listener = ChannelListener(
                self.outbox(chat_id),
                channel_id=self.config.id,
                chat_id=chat_id,
                redact=self.redact,
                buttons=self.adapter.buttons and not self.config.headless,
                on_unanswerable_approval=lambda approval_id: self._deny(chat_id, approval_id),
                on_offer=lambda approval_id: self.service.approvals.offered(
                    approval_id, self.config.id, chat_id
                ),
                on_decided=lambda approval_id, approved: self.service.approvals.decide(
                    approval_id, approved
                ),
            )
            self.listeners[chat_id] = listener
        return listener

    def _deny(self, chat_id: str, approval_id: str) -> None:
        self.worker(chat_id).put(
            ButtonPress(chat_id=chat_id, user_id=HEADLESS, data=f"deny:{approval_id}")
        )

    def worker(self, chat_id: str) -> ChatWorker:
        worker = self.workers.get(chat_id)
        if worker is None:
            deps = self.service.deps
            context = ChatContext(
                config=self.config,
                adapter=self.adapter,
                outbox=self.outbox(chat_id),
                listener=self.listener(chat_id),
                conversations=deps.conversations,
                db=deps.db,
                sessions=deps.sessions,
                validate_model=deps.validate_model,
                clock=self.service.clock,
                task_group=self.service.task_group,
                approvals=self.service.approvals,
                send_timeout=deps.send_timeout,
            )
            worker = self.workers[chat_id] = ChatWorker(context, chat_id)
            self.service.task_group.start_soon(worker.run)
        return worker

    # --- lifecycle ------------------------------------------------------------------------------

    async def serve(self) -> None:
        lease = self.service.deps.receiver_lease
        if lease is None or not self.config.single_receiver:
            await self._run(receive=True)
            return
        await serve_single_receiver(
            lease, f"channel:{self.config.id}", self._run_as, on_role=self._set_role
        )

    def _set_role(self, role: str) -> None:
        self.role = role

    async def _run_as(self, receive: bool) -> None:
        await self._run(receive=receive)

    async def _run(self, *, receive: bool) -> None:
        try:
            await self.adapter.run(self, receive=receive)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as err:
            log.warning("channel %s stopped: %s", self.config.id, self.redact(str(err)))
            self.disconnected(str(err) or type(err).__name__)

    async def recover(self) -> None:
        """Finish answers a previous process left without their terminal text (once each): the
        platform message is edited, or, when its id never came back, a new one is sent."""
        db = self.service.deps.db
        for delivery in await db.channels.live_deliveries(self.config.id):
            if delivery.anchor_message_id is None:
                continue
            row = await db.messages.get(delivery.anchor_message_id)
            if row is None or row.status == "pending":
                continue
            text = "".join(
                str(p.get("text", "")) for p in row.parts if p.get("type") == "text"
            ).strip()
            if row.status == "paused":
                text = stopped_text(text)
            elif row.status == "error":
                error = next((p for p in row.parts if p.get("type") == "data-error"), None)
                data = error.get("data") if error else None
                message = data.get("message") if isinstance(data, dict) else None
                text = error_text(text, str(message) if message else "the answer was interrupted")
            outbox = self.outbox(delivery.chat_id)
            outbox.resume(delivery.id, delivery.anchor_message_id, delivery.platform_message_id)
            outbox.terminal(delivery.id, self.redact(text))

    def public(self) -> dict[str, Any]:
        outboxes = self.outboxes.values()
        return {
            **self.config.public(),
            "state": self.state,
            **({"role": self.role} if self.role is not None else {}),
            "lastError": self.last_error,
            "refused": self.refused,
            "activeChats": sorted(self.workers),
            "deliveryFailures": sum(o.stats.failures for o in outboxes),
        }


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
