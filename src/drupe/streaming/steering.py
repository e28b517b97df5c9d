"""Pure decisions of the chat steer queue (reference §5).

A steer is a user message submitted while the conversation's turn is live. Its row is already
persisted; the queue only decides when it is answered. Decisions:

* on enqueue, from the stream's current status: ``pending``/``streaming`` -> queue (the running
  turn yields at its next step boundary); ``awaiting-approval`` -> queue and hold (the approval
  continuation drains it); ``done`` or no stream -> queue and start now (the turn settled while
  the steer was being prepared); ``aborted``/``error`` -> drop (the row stays, visibly unanswered);
* after a conversation-level terminal: ``done`` with a non-empty queue -> chain one continuation;
  ``aborted``/``error`` -> drop the whole queue; ``awaiting-approval`` -> hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["EnqueueDecision", "PendingSteer", "TerminalDecision", "after_terminal", "on_enqueue"]

EnqueueDecision = Literal["queue", "queue-and-start", "queue-and-hold", "drop"]
TerminalDecision = Literal["chain", "drop", "hold", "none"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingSteer:
    """A persisted steer row waiting for its answer."""

    user_message_id: str
    model_id: str | None = None
    options: tuple[tuple[str, str], ...] = ()


def on_enqueue(status: str | None) -> EnqueueDecision:
    """Decide what a new steer does, given the conversation's stream status (None: no stream)."""
    if status in ("pending", "streaming"):
        return "queue"
    if status == "awaiting-approval":
        return "queue-and-hold"
    if status in ("aborted", "error"):
        return "drop"
    return "queue-and-start"


def after_terminal(status: str, queue_length: int) -> TerminalDecision:
    """Decide what happens to the queue once the conversation reached ``status``."""
    if queue_length == 0:
        return "none"
    if status == "done":
        return "chain"
    if status == "awaiting-approval":
        return "hold"
    return "drop"
