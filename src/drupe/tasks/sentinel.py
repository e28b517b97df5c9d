"""``TaskSentinel``: the listener that turns one task run's stream into one outcome.

Contract (reference §6.11):

* it accumulates ``text-delta`` chunks (reasoning and tool chunks are ignored);
* it settles ONCE: ``done`` -> a result; ``paused`` -> a result, or a failure when the task's
  own timeout aborted the run (``timed_out``), or ``cancelled`` when the run was cancelled;
  ``error`` -> a failure with the error's message;
* it settles at the FIRST terminal of its turn, even when the stream stays open for a successor
  (``is_conversation_done`` false): a queued follow-up, or the continuation that answers a
  steer, answers someone else, not the task;
* at settle it calls ``on_settle`` synchronously (the runner detaches every listener of the run
  there, before the manager can launch a successor turn that would inherit them), and from then
  on reports ``is_alive() == False``.

``settled`` is set after the outcome is recorded; ``outcome`` is then a ``SentinelOutcome``.
The sentinel runs in the ``cleanup`` terminal phase: after persistence, so the row it points at
is final when the runner reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import anyio

from drupe.streaming.listeners.base import (
    BaseListener,
    StreamEvent,
    TerminalPhase,
    TerminalResult,
)

__all__ = ["SentinelOutcome", "TaskSentinel"]

OutcomeStatus = Literal["completed", "failed", "cancelled"]


@dataclass(frozen=True, slots=True)
class SentinelOutcome:
    status: OutcomeStatus
    text: str
    error: str | None = None
    message_id: str | None = None


class TaskSentinel(BaseListener):
    terminal_phase: TerminalPhase | None = "cleanup"

    def __init__(self, listener_id: str) -> None:
        super().__init__(listener_id)
        self._parts: list[str] = []
        self.settled = anyio.Event()
        self.outcome: SentinelOutcome | None = None
        self.timed_out: str | None = None
        """Set (to the failure text) by the runner before it aborts the run for its timeout."""
        self.cancelled = False
        """Set by the runner before it aborts the run for a cancel."""
        self.message_id: str | None = None
        self.on_settle: Callable[[], None] | None = None

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def on_chunk(self, event: StreamEvent) -> None:
        if self.outcome is not None:
            return
        chunk = event.chunk
        if chunk.get("type") == "text-delta":
            delta = chunk.get("delta")
            if isinstance(delta, str):
                self._parts.append(delta)
        if event.anchor_message_id is not None:
            self.message_id = event.anchor_message_id

    async def on_done(self, result: TerminalResult) -> None:
        self._note_message(result)
        self.settle(SentinelOutcome("completed", self.text.strip(), None, self.message_id))

    async def on_paused(self, result: TerminalResult) -> None:
        self._note_message(result)
        if self.timed_out is not None:
            outcome = SentinelOutcome("failed", self.text.strip(), self.timed_out, self.message_id)
        elif self.cancelled:
            outcome = SentinelOutcome("cancelled", self.text.strip(), "cancelled", self.message_id)
        else:
            outcome = SentinelOutcome("completed", self.text.strip(), None, self.message_id)
        self.settle(outcome)

    async def on_error(self, result: TerminalResult) -> None:
        self._note_message(result)
        message = (result.error or {}).get("message") or "the run failed"
        self.settle(SentinelOutcome("failed", self.text.strip(), str(message), self.message_id))

    def settle(self, outcome: SentinelOutcome) -> None:
        """Record the outcome once (later calls are ignored)."""
        if self.outcome is not None:
            return
        self.outcome = outcome
        if self.on_settle is not None:
            self.on_settle()
        self.settled.set()

    def is_alive(self) -> bool:
        return self.outcome is None

    def _note_message(self, result: TerminalResult) -> None:
        if result.anchor_message_id is not None:
            self.message_id = result.anchor_message_id
