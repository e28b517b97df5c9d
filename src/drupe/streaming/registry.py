"""``StreamRegistry``: the ``conversation id -> LiveStream`` map and its eviction.

Contract:

* At most one stream per conversation is registered; a registered stream that is no longer live
  is in its grace period (attachable, final messages) or held for a runtime successor.
* ``is_current(stream)`` is the identity check every conversation-level effect makes: an effect
  of a replaced stream never touches its successor.
* ``schedule_eviction`` keeps an ended stream for its grace period, then evicts it; ``evict``
  (or ``forget``) ends the wait early. Evicting sets ``stream.evicted`` and unregisters the
  stream only while it is still the current one.
* ``carried_listeners`` are the subscribers a successor turn inherits: unphased listeners that
  are neither persistence nor runtime listeners.

Pure bookkeeping: the grace timers run as tasks of the manager's task group (``spawn``).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator
from typing import Any, Protocol

import anyio

from drupe.streaming.listeners.base import Listener
from drupe.streaming.live import LiveStream

__all__ = ["Spawn", "StreamRegistry"]


class Spawn(Protocol):
    """``spawn(fn, *args)``: run ``fn(*args)`` as a task of the manager's task group."""

    def __call__(self, fn: Callable[..., Coroutine[Any, Any, Any]], /, *args: Any) -> None: ...


_CARRIED_EXCLUDED = ("persistence:", "agent-runtime:")


class StreamRegistry:
    """Which stream each conversation has, and when an ended one leaves."""

    def __init__(self, spawn: Spawn) -> None:
        self._spawn = spawn
        self.streams: dict[str, LiveStream] = {}

    def __len__(self) -> int:
        return len(self.streams)

    def __contains__(self, conversation_id: object) -> bool:
        return conversation_id in self.streams

    def __iter__(self) -> Iterator[LiveStream]:
        return iter(list(self.streams.values()))

    def get(self, conversation_id: str) -> LiveStream | None:
        return self.streams.get(conversation_id)

    def register(self, stream: LiveStream) -> None:
        self.streams[stream.conversation_id] = stream

    def is_current(self, stream: LiveStream) -> bool:
        return self.streams.get(stream.conversation_id) is stream

    def carried_listeners(self, conversation_id: str) -> list[Listener]:
        """The subscribers a successor turn inherits (no persistence or runtime listeners)."""
        stream = self.streams.get(conversation_id)
        if stream is None:
            return []
        return [
            item
            for item in stream.listeners.values()
            if item.terminal_phase is None and not item.listener_id.startswith(_CARRIED_EXCLUDED)
        ]

    # --- eviction ---------------------------------------------------------------------------

    def schedule_eviction(self, stream: LiveStream) -> None:
        """Keep ``stream`` attachable for its grace period, then evict it."""
        if stream.grace_period <= 0:
            self.evict(stream)
            return
        self._spawn(self._evict_later, stream)

    async def _evict_later(self, stream: LiveStream) -> None:
        with anyio.move_on_after(stream.grace_period):
            await stream.evicted.wait()  # forget() or a successor ends the wait early
        self.evict(stream)

    def evict(self, stream: LiveStream) -> None:
        if self.streams.get(stream.conversation_id) is stream:
            del self.streams[stream.conversation_id]
        stream.evicted.set()

    def forget(self, conversation_id: str) -> None:
        """Unregister the conversation's stream, whatever its state (it was deleted)."""
        stream = self.streams.pop(conversation_id, None)
        if stream is not None:
            stream.evicted.set()
