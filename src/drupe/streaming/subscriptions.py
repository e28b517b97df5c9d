"""``Subscriptions``: attaching subscribers to a conversation's stream, and detaching them.

Contract (``docs/lifecycles/stream.md`` rules 2 and 4):

* Attaching never changes the stream. A live stream gives the subscriber its replay (exact
  after a cursor the stream issued, compact otherwise) and then live chunks, with no await in
  between; an ended stream in its grace period answers with its final messages; no stream
  answers not found.
* A new subscriber beyond ``max_listeners`` is refused (``too-many-subscribers``).
* Detaching only removes the listener; it never aborts (the ``background_mode`` policy of the
  manager decides what happens when the last subscriber leaves).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from drupe.streaming.config import StreamConfig
from drupe.streaming.contracts import Attached, AttachFinished, AttachNotFound, AttachResult
from drupe.streaming.listeners.base import Listener
from drupe.streaming.live import LiveStream
from drupe.streaming.registry import StreamRegistry

__all__ = ["Subscriptions", "streaming_ids"]


def streaming_ids(stream: LiveStream) -> tuple[str, ...]:
    """The executions of ``stream`` that are still streaming."""
    return tuple(e.execution_id for e in stream.executions.values() if e.status == "streaming")


class Subscriptions:
    """Attach and detach subscribers through the registry."""

    def __init__(self, registry: StreamRegistry, config: StreamConfig) -> None:
        self._registry = registry
        self._config = config

    def attach(
        self,
        conversation_id: str,
        listener: Listener,
        *,
        after: int | None = None,
        execution_ids: Iterable[str] | None = None,
    ) -> AttachResult:
        """Attach a subscriber: replay then live chunks; final messages in grace; not found."""
        stream = self._registry.get(conversation_id)
        if stream is None:
            return AttachNotFound()
        if not stream.is_live:
            first_error = next(
                (e.error for e in stream.executions.values() if e.error is not None), None
            )
            return AttachFinished(
                status=stream.status,
                turn_id=stream.turn_id,
                final_messages=stream.final_messages(),
                error=first_error if stream.status == "error" else None,
            )
        replayed = self.add(stream, listener, after=after, execution_ids=execution_ids)
        return Attached(stream.turn_id, replayed, streaming_ids(stream))

    def add(
        self,
        stream: LiveStream,
        listener: Listener,
        *,
        after: int | None = None,
        execution_ids: Iterable[str] | None = None,
    ) -> int:
        """Replay to ``listener`` and register it on ``stream``; returns the replayed count."""
        return stream.attach_listener(
            listener,
            after=after,
            execution_ids=execution_ids,
            max_subscribers=self._config.max_listeners,
        )

    def inject(self, stream: LiveStream, listeners: Sequence[Listener]) -> None:
        """Attach every listener of an inject (a send with no models) to ``stream``."""
        for listener in listeners:
            self.add(stream, listener)

    def detach(self, conversation_id: str, listener_id: str) -> bool:
        """Remove a subscriber. Never aborts by itself."""
        stream = self._registry.get(conversation_id)
        if stream is None:
            return False
        return stream.remove_listener(listener_id) is not None
