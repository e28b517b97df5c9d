"""``SteerChain``: the chat steer queue of each conversation and its continuation launches.

Contract (decisions in ``steering``; reference §5):

* ``enqueue`` decides from the conversation's stream status: queue, queue and hold, queue and
  start now (the turn settled while the steer was prepared), or drop (the row stays unanswered).
* ``start_next`` runs under the conversation's admission lock: it does nothing while a turn is
  live (that turn's terminal decides); otherwise it shifts the head of the queue, evicts the
  ended stream and calls the launcher (the dispatcher) with the stream's carried subscribers.
  With an empty queue it releases a chaining stream into its grace period.
* ``after_terminal`` applies the decision of ``steering.after_terminal`` (plus the hold
  policies) once a conversation's last execution ended; a drop empties the queue.
* A launch that raises ends the conversation ``error``: the whole queue is dropped, the
  carried subscribers get an error terminal (bounded), and the status record says ``error``.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager

from drupe.ids import next_turn_id
from drupe.streaming.contracts import SteerLauncher
from drupe.streaming.listeners.base import (
    Listener,
    SerializedError,
    TerminalResult,
    serialize_error,
)
from drupe.streaming.live import LiveStream
from drupe.streaming.registry import Spawn, StreamRegistry
from drupe.streaming.status_book import StatusBook
from drupe.streaming.steering import (
    EnqueueDecision,
    PendingSteer,
    TerminalDecision,
    after_terminal,
    on_enqueue,
)
from drupe.streaming.terminal import notify_listeners

__all__ = ["SteerChain"]

log = logging.getLogger(__name__)


class SteerChain:
    """Per-conversation steer queues, and the launch of the continuation that answers one."""

    def __init__(
        self,
        *,
        registry: StreamRegistry,
        book: StatusBook,
        lock: Callable[[str], AbstractAsyncContextManager[None]],
        spawn: Spawn,
        terminal_timeout: float,
    ) -> None:
        self._registry = registry
        self._book = book
        self._lock = lock
        self._spawn = spawn
        self._terminal_timeout = terminal_timeout
        self.queues: dict[str, deque[PendingSteer]] = {}
        self.launcher: SteerLauncher | None = None

    # --- queue ------------------------------------------------------------------------------

    def pending(self, conversation_id: str) -> list[PendingSteer]:
        return list(self.queues.get(conversation_id, ()))

    def queue_length(self, conversation_id: str) -> int:
        queue = self.queues.get(conversation_id)
        return len(queue) if queue else 0

    def enqueue(self, conversation_id: str, steer: PendingSteer) -> EnqueueDecision:
        """Queue a persisted steer row; decide from the stream status (reference §5.1)."""
        stream = self._registry.get(conversation_id)
        decision = on_enqueue(stream.status if stream is not None else None)
        if decision == "drop":
            log.info("steer %r dropped: the turn already ended", steer.user_message_id)
            return decision
        self.queues.setdefault(conversation_id, deque()).append(steer)
        if decision == "queue-and-start":
            self._spawn(self.start_next, conversation_id)
        return decision

    def take(self, conversation_id: str) -> PendingSteer | None:
        """Shift the head of the queue (used by the approval continuation to drain it)."""
        queue = self.queues.get(conversation_id)
        if not queue:
            return None
        steer = queue.popleft()
        if not queue:
            self.queues.pop(conversation_id, None)
        return steer

    def drop(self, conversation_id: str) -> int:
        """Drop the whole queue; returns how many steers it held."""
        return len(self.queues.pop(conversation_id, ()))

    def after_terminal(
        self, stream: LiveStream, *, held: Callable[[str], bool]
    ) -> TerminalDecision:
        """What follows a conversation-level terminal: chain a steer, hold, drop or none.

        ``held(conversation_id)`` asks the hold policies (runtime-driven turns) about a ``done``
        stream with an empty queue. Chain and hold mark the stream ``chaining``.
        """
        conversation_id = stream.conversation_id
        decision = after_terminal(stream.status, self.queue_length(conversation_id))
        if decision == "chain":
            stream.chaining = True
        elif stream.status == "done" and held(conversation_id):
            stream.chaining = True
            decision = "hold"
        elif decision == "drop":
            dropped = self.drop(conversation_id)
            log.info(
                "dropped %d queued steer(s) of %r after %s", dropped, conversation_id, stream.status
            )
        return decision

    # --- continuation -----------------------------------------------------------------------

    async def start_next(self, conversation_id: str) -> None:
        """Launch the continuation that answers the head of the queue (if nothing is live)."""
        async with self._lock(conversation_id):
            stream = self._registry.get(conversation_id)
            if stream is not None and stream.is_live:
                return  # that turn's own terminal decides
            steer = self.take(conversation_id)
            if steer is None:
                if stream is not None and stream.chaining:
                    stream.chaining = False
                    self._registry.schedule_eviction(stream)
                return
            carried = self._registry.carried_listeners(conversation_id)
            if stream is not None:
                self._registry.evict(stream)
            launcher = self.launcher
            try:
                if launcher is None:
                    raise RuntimeError("no steer launcher is installed")
                await launcher(conversation_id, steer, carried)
            except Exception as err:  # isolation boundary: continuation launch failure
                log.exception("steer continuation of %r failed to launch", conversation_id)
                await self.fail_launch(conversation_id, stream, carried, serialize_error(err))

    async def fail_launch(
        self,
        conversation_id: str,
        previous: LiveStream | None,
        carried: Sequence[Listener],
        error: SerializedError,
    ) -> None:
        """End the conversation ``error``: drop the queue and tell the carried subscribers."""
        self.drop(conversation_id)
        turn_id = previous.turn_id if previous is not None else next_turn_id()
        result = TerminalResult(
            status="error",
            conversation_id=conversation_id,
            turn_id=turn_id,
            execution_id="",
            model_id="",
            attempt_id=0,
            anchor_message_id=None,
            final_message=None,
            is_conversation_done=True,
            error=error,
        )
        await notify_listeners(carried, result, limit=self._terminal_timeout)
        self._book.record(conversation_id, "error", turn_id)
