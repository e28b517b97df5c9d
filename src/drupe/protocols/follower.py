"""``AnswerFollower``: a listener that follows ONE answer for a protocol response.

Contract (the ``Follower`` of ``drupe.admission.conversations``):

* It is attached by the port before the caller knows which answer is its own, so until
  ``follow(turn, execution)`` / ``follow_next_turn(after)`` / ``follow_any()`` is called it
  holds everything it gets ("pending"), then re-reads the held items under the chosen rule.
* ``follow_next_turn(after)``: the first execution that speaks in a turn other than
  ``after`` (the answer to a steer, after the running turn); nothing of ``after`` — chunk or
  terminal — is taken.
* ``follow_any()``: every chunk and the first terminal (an approval's continuation, to which
  only this listener's own answer is ever attached).
* Never blocks the producer: items queue (bounded; past the bound ``overflowed`` is set and
  the consumer ends the response); ``take(idle)`` hands them over.
"""

from __future__ import annotations

from collections import deque
from typing import Literal

import anyio

from drupe.streaming.listeners.base import BaseListener, StreamEvent, TerminalResult

__all__ = ["AnswerFollower", "FollowedItem"]

FollowedItem = StreamEvent | TerminalResult
_MAX_QUEUED = 50_000


class AnswerFollower(BaseListener):
    def __init__(self, listener_id: str, *, max_queued: int = _MAX_QUEUED) -> None:
        super().__init__(listener_id)
        self._mode: Literal["pending", "target", "next-turn", "any"] = "pending"
        self._target: tuple[str, str] | None = None
        self._after: str | None = None
        self._held: list[FollowedItem] = []
        self._items: deque[FollowedItem] = deque()
        self._wakeup: anyio.Event | None = None
        self._max_queued = max_queued
        self.overflowed = False
        self.closed = False

    # --- the rule -----------------------------------------------------------------------

    @property
    def target(self) -> tuple[str, str] | None:
        return self._target

    def follow(self, turn_id: str, execution_id: str) -> None:
        self._mode, self._target = "target", (turn_id, execution_id)
        self._release()

    def follow_next_turn(self, after_turn_id: str | None) -> None:
        self._mode, self._after, self._target = "next-turn", after_turn_id, None
        self._release()

    def follow_any(self) -> None:
        self._mode = "any"
        self._release()

    def _release(self) -> None:
        held, self._held = self._held, []
        for item in held:
            self._offer(item)

    def _selects(self, turn_id: str, execution_id: str) -> bool:
        if self._mode == "any":
            return True
        if self._target is None:
            if self._mode != "next-turn" or turn_id == self._after:
                return False
            self._target = (turn_id, execution_id)
        return self._target == (turn_id, execution_id)

    def _offer(self, item: FollowedItem) -> None:
        if self._mode == "pending":
            self._held.append(item)
            return
        if not self._selects(item.turn_id, item.execution_id):
            return
        if len(self._items) >= self._max_queued:
            self.overflowed = True
        else:
            self._items.append(item)
        if self._wakeup is not None:
            self._wakeup.set()

    # --- listener ---------------------------------------------------------------------------

    def on_chunk(self, event: StreamEvent) -> None:
        self._offer(event)

    async def on_done(self, result: TerminalResult) -> None:
        self._offer(result)

    async def on_paused(self, result: TerminalResult) -> None:
        self._offer(result)

    async def on_error(self, result: TerminalResult) -> None:
        self._offer(result)

    def end_with(self, result: TerminalResult) -> None:
        self._offer(result)

    def is_alive(self) -> bool:
        return not self.closed

    # --- consumer --------------------------------------------------------------------------

    async def take(self, idle: float) -> list[FollowedItem] | None:
        """Everything queued, waiting up to ``idle`` s for the first item; None: idle."""
        if not self._items and not self.overflowed:
            self._wakeup = anyio.Event()
            with anyio.move_on_after(idle):
                await self._wakeup.wait()
            self._wakeup = None
            if not self._items and not self.overflowed:
                return None
        items = list(self._items)
        self._items.clear()
        return items
