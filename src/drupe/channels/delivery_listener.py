"""``ChannelListener``: streams a conversation's answers into one IM chat (reference §2.6).

One listener per (channel, chat), long-lived: the channel keeps the same object and hands it to
every dispatch of the chat, so a steer or follow-up that joins a live stream replaces it by id
with itself (one delivery path per answer and chat: never two listeners for one chat). The
replay such a re-attach sends is recognised by its sequence numbers and ignored.

* ``on_chunk`` (sync, never blocks): ``text-delta`` chunks accumulate per execution; each
  update queues the redacted text as a live update of that execution's platform message. A
  ``tool-approval-request`` queues a notice with Approve/Deny buttons (``approve:<id>`` /
  ``deny:<id>``) when the channel has buttons, else a plain notice and
  ``on_unanswerable_approval(id)`` (the channel denies it: a headless chat never hangs).
  Offered buttons are reported (``on_offer(id)``); the call's later ``tool-output-available``,
  ``tool-output-error`` (approved) or ``tool-output-denied`` (denied) reports the decision,
  whatever surface made it (``on_decided(id, approved)``: the buttons are settled).
* ``on_done``: the redacted final text (nothing when it is empty); ``on_paused``: the partial
  text followed by ``_(stopped)_``; ``on_error``: the partial text (if any) followed by
  ``Error: <message>``. Each is queued as the execution's terminal text; the ``ChatOutbox``
  delivers it at most once.
* The listener never awaits the platform: every terminal callback only queues and returns.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from drupe.channels.outbox import Button, ChatOutbox
from drupe.channels.text_shaping import error_text, stopped_text
from drupe.streaming.listeners.base import BaseListener, Listener, StreamEvent, TerminalResult

__all__ = ["ChannelListener", "ChatDelivery", "channel_listener_id"]

_DECIDED = frozenset(("tool-output-available", "tool-output-error", "tool-output-denied"))
_MAX_ASKED = 256


class ChatDelivery(Protocol):
    """The port through which other producers (scheduled tasks) reach IM chats.

    Implemented by ``drupe.channels.service.ChannelService``; wired by the composition root.
    """

    def deliver(
        self, channel_id: str, chat_id: str, text: str, *, delivery_id: str | None = None
    ) -> str:
        """Queue ``text`` to a chat (never blocks): redacted, split at the platform limit,
        sent at most once per ``delivery_id`` (also across restarts); returns the id. Raises
        ``ValidationError`` for an unknown channel."""
        ...

    def listener(self, channel_id: str, chat_id: str) -> Listener:
        """The chat's one listener: attach it to a run's turn (as a subscriber) to stream the
        run's answer into the chat as a user's would be (one delivery path per run and chat)."""
        ...


def channel_listener_id(channel_id: str, chat_id: str) -> str:
    return f"channel:{channel_id}:{chat_id}"


@dataclass(slots=True)
class _Execution:
    delivery_id: str
    text: str = ""
    seq: int = -1


class ChannelListener(BaseListener):
    def __init__(
        self,
        outbox: ChatOutbox,
        *,
        channel_id: str,
        chat_id: str,
        redact: Callable[[str], str] = lambda text: text,
        buttons: bool = True,
        on_terminal: Callable[[TerminalResult], None] = lambda result: None,
        on_unanswerable_approval: Callable[[str], None] = lambda approval_id: None,
        on_offer: Callable[[str], None] = lambda approval_id: None,
        on_decided: Callable[[str, bool], object] = lambda approval_id, approved: None,
    ) -> None:
        super().__init__(channel_listener_id(channel_id, chat_id))
        self.outbox = outbox
        self.redact = redact
        self.buttons = buttons
        self.on_terminal = on_terminal
        self.on_unanswerable_approval = on_unanswerable_approval
        self.on_offer = on_offer
        self.on_decided = on_decided
        self._asked: dict[str, str] = {}
        """tool call id -> approval id of the approvals this chat was asked."""
        self._executions: dict[str, _Execution] = {}
        self._tools: dict[str, tuple[str, Any]] = {}

    @property
    def answering(self) -> bool:
        """Whether an answer is being shown in the chat now (its end is still to come)."""
        return bool(self._executions)

    def _execution(self, execution_id: str, anchor_message_id: str | None) -> _Execution:
        entry = self._executions.get(execution_id)
        if entry is None:
            entry = self._executions[execution_id] = _Execution(uuid.uuid4().hex)
            self.outbox.begin(entry.delivery_id, anchor_message_id)
        return entry

    def on_chunk(self, event: StreamEvent) -> None:
        chunk = event.chunk
        kind = chunk.get("type")
        entry = self._execution(event.execution_id, event.anchor_message_id)
        if event.seq <= entry.seq:
            return  # a replay of what this listener already saw (re-attached to the stream)
        entry.seq = event.seq
        if kind == "text-delta":
            entry.text += str(chunk.get("delta", ""))
            self.outbox.live(entry.delivery_id, self.redact(entry.text))
        elif kind == "tool-input-available":
            self._tools[str(chunk.get("toolCallId"))] = (
                str(chunk.get("toolName")),
                chunk.get("input"),
            )
        elif kind == "tool-approval-request":
            self._approval(str(chunk.get("approvalId")), str(chunk.get("toolCallId")))
        elif kind in _DECIDED and (asked := self._asked.pop(str(chunk.get("toolCallId")), None)):
            self.on_decided(asked, kind != "tool-output-denied")

    def _approval(self, approval_id: str, tool_call_id: str) -> None:
        name, args = self._tools.get(tool_call_id, ("a tool", None))
        shown = f"`{name}`" + (f" with `{args}`" if args not in (None, {}, "") else "")
        text = self.redact(f"Approval needed: {shown}")
        if self.buttons:
            self.outbox.notice(
                text,
                [
                    Button("Approve", f"approve:{approval_id}"),
                    Button("Deny", f"deny:{approval_id}"),
                ],
                approval_id=approval_id,
            )
            self._asked[tool_call_id] = approval_id
            while len(self._asked) > _MAX_ASKED:
                del self._asked[next(iter(self._asked))]
            self.on_offer(approval_id)
        else:
            self.outbox.notice(f"{text}\n(this channel cannot approve: the call is denied)")
            self.on_unanswerable_approval(approval_id)

    def _final(self, result: TerminalResult, shape: Callable[[str], str]) -> None:
        entry = self._executions.pop(result.execution_id, None)
        if entry is None:
            entry = self._execution(result.execution_id, result.anchor_message_id)
            self._executions.pop(result.execution_id, None)
        self.outbox.terminal(entry.delivery_id, self.redact(shape(entry.text)))
        self.on_terminal(result)

    async def on_done(self, result: TerminalResult) -> None:
        self.end_with(result)

    async def on_paused(self, result: TerminalResult) -> None:
        self.end_with(result)

    async def on_error(self, result: TerminalResult) -> None:
        self.end_with(result)

    # --- fed from a cluster's chunk log (``drupe.cluster.follower``) ---------------------------

    @property
    def target(self) -> tuple[str, str] | None:
        """A channel chat follows every execution of its conversation (no single target)."""
        return None

    def follow(self, turn_id: str, execution_id: str) -> None:
        """Nothing to choose: every execution is delivered."""

    def end_with(self, result: TerminalResult) -> None:
        """An execution's terminal; one without an execution id (a takeover's turn-wide end)
        ends every execution still open."""
        if not result.execution_id:
            for execution_id in list(self._executions):
                self.end_with(replace(result, execution_id=execution_id))
            return
        if result.status == "success":
            self._final(result, lambda text: text.strip())
        elif result.status == "paused":
            self._final(result, stopped_text)
        else:
            message = (result.error or {}).get("message")
            self._final(result, lambda text: error_text(text, str(message) if message else None))
