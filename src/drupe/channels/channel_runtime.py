"""``ChannelRuntime``: one configured channel: its inbox, its chats' parts, its adapter's life.

Contract:

* The inbox (``message``, ``button``; called by the adapter, never blocks) drops redeliveries
  (the last 4,096 event ids), refuses chats the allow-list does not admit (one reply per user
  per 10 minutes and at most 30 refusal replies a minute per channel; nothing is dispatched or
  stored), applies the per-chat rate limit, and queues the item on the chat's ``ChatWorker``. A
  refused button press is answered "not allowed".
* Per chat, made on first use and owned by the service's task group: one ``ChatOutbox`` pump,
  one ``ChannelListener`` (its approval offers and decisions go to the service's
  ``ApprovalBoard``; an approval it cannot show is denied) and one ``ChatWorker``.
* ``serve`` runs the adapter (in cluster mode a single-connection channel only on the node that
  holds the receiver lease); a failure is recorded, redacted, as ``state = error``.
* ``recover`` gives each answer a previous process left ``live`` its terminal text once, from
  the stored row. Every text that leaves is redacted of every configured channel's secrets.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from drupe.channels.approval_press import HEADLESS, answer_press
from drupe.channels.chat_commands import refusal_text
from drupe.channels.chat_worker import ChatContext, ChatWorker
from drupe.channels.contract import ButtonPress, ChannelAdapter, Inbound
from drupe.channels.delivery_listener import ChannelListener
from drupe.channels.guard import RateWindow, admitted
from drupe.channels.logs import install_secret_filter
from drupe.channels.outbox import DEFAULT_EDIT_INTERVAL, DEFAULT_SEND_TIMEOUT, ChatOutbox, Clock
from drupe.channels.receiver import Receiving, SoleReceiver
from drupe.channels.text_shaping import error_text, redact, stopped_text

if TYPE_CHECKING:
    from drupe.admission.conversations import Conversations
    from drupe.channels.config import ChannelConfig
    from drupe.channels.service import ChannelService
    from drupe.persistence.db import Database
    from drupe.sessions.host import AgentSessionHost

__all__ = ["ChannelDeps", "ChannelRuntime"]

log = logging.getLogger(__name__)

_SEEN_EVENTS = 4096
_REFUSAL_PERIOD = 600.0
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
    receiving: Receiving = field(default_factory=SoleReceiver)
    """How this node receives a single-connection channel (``receiver.py``): at once in one
    process, while it holds the channel's lease on a cluster node."""


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
        if not self.config.single_receiver:
            await self._run(receive=True)
            return
        await self.service.deps.receiving.serve(
            f"channel:{self.config.id}", self._run_as, on_role=self._set_role
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
