"""The delivery port: how a task run's answer reaches the chats subscribed to its schedule.

IM channels implement ``DeliveryPort`` (Drupe's tasks never import them). Per run, the runner
asks the port for one listener per subscribed chat and attaches it to the run's stream next to
the sentinel; the listener delivers the answer the way the channel likes (one message at the
end, or live edits). The listener must NOT post a generic error text on an ``error`` terminal:
the runner sends its own failure notice through ``send``:

    [Task failed] <task name> / <duration> / <error>

The run's listeners are detached when its sentinel settles (synchronously, at the turn's first
terminal), and before a timeout or cancel aborts the run, so a later turn of the session is never
delivered to a task's chats, and an aborted run delivers nothing but the failure notice.

``BufferedDelivery(send)`` adapts a plain ``send(target, text)`` coroutine to the port: its
listener accumulates ``text-delta`` chunks and sends the whole answer once at ``done`` (with
``_(stopped)_`` appended after a stop; nothing after an error). ``NoDelivery`` drops everything
with a warning (the default until a channel layer is wired).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from drupe.streaming.listeners.base import (
    BaseListener,
    Listener,
    StreamEvent,
    TerminalPhase,
    TerminalResult,
)

__all__ = [
    "BufferedDelivery",
    "DeliveryPort",
    "DeliveryTarget",
    "NoDelivery",
    "failure_text",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DeliveryTarget:
    """One subscribed chat: a channel id (as the channel layer names it) and a chat id in it."""

    channel: str
    chat: str

    @classmethod
    def of(cls, data: dict[str, Any]) -> DeliveryTarget:
        return cls(str(data["channel"]), str(data["chat"]))


class DeliveryPort(Protocol):
    """Implemented by the IM channel layer; wired in by the composition root."""

    def listener(self, target: DeliveryTarget, *, listener_id: str) -> Listener:
        """A listener that delivers this run's answer to ``target``.

        It must stay silent on ``on_error`` (the task sends its own failure notice). Its
        ``terminal_phase`` should be None or ``cleanup``.
        """
        ...

    async def send(self, target: DeliveryTarget, text: str) -> None:
        """Send one plain message (the failure notice). May raise; the runner logs it."""
        ...


def failure_text(name: str, duration_s: float, error: str) -> str:
    """The failure notice sent to subscribed chats."""
    return f"[Task failed] {name} / {round(duration_s)}s / {error}"


class _BufferedListener(BaseListener):
    terminal_phase: TerminalPhase | None = "cleanup"

    def __init__(
        self,
        listener_id: str,
        target: DeliveryTarget,
        send: Callable[[DeliveryTarget, str], Awaitable[None]],
    ) -> None:
        super().__init__(listener_id)
        self.target = target
        self._send = send
        self._parts: list[str] = []
        self._done = False

    def on_chunk(self, event: StreamEvent) -> None:
        chunk = event.chunk
        if chunk.get("type") == "text-delta" and isinstance(chunk.get("delta"), str):
            self._parts.append(chunk["delta"])

    async def on_done(self, result: TerminalResult) -> None:
        await self._deliver("".join(self._parts).strip() or "(no answer)")

    async def on_paused(self, result: TerminalResult) -> None:
        await self._deliver(("".join(self._parts).strip() + "\n\n_(stopped)_").strip())

    async def on_error(self, result: TerminalResult) -> None:
        self._done = True  # silent: the task sends "[Task failed] ..."

    async def _deliver(self, text: str) -> None:
        if self._done:
            return
        self._done = True
        try:
            await self._send(self.target, text)
        except Exception:  # isolation boundary: a channel failing to send
            log.warning("task delivery to %s/%s failed", self.target.channel, self.target.chat)

    def is_alive(self) -> bool:
        return not self._done


class BufferedDelivery:
    """A ``DeliveryPort`` over ``send(target, text)``: one message per answer."""

    def __init__(self, send: Callable[[DeliveryTarget, str], Awaitable[None]]) -> None:
        self._send_text = send

    def listener(self, target: DeliveryTarget, *, listener_id: str) -> Listener:
        return _BufferedListener(listener_id, target, self._send_text)

    async def send(self, target: DeliveryTarget, text: str) -> None:
        await self._send_text(target, text)


class NoDelivery(BufferedDelivery):
    """No channel layer: deliveries are dropped with a warning."""

    def __init__(self) -> None:
        super().__init__(self._drop)

    @staticmethod
    async def _drop(target: DeliveryTarget, text: str) -> None:
        log.warning(
            "task delivery to %s/%s dropped: no channel layer is wired", target.channel, target.chat
        )
