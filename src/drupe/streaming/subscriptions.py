"""``Subscriptions``: attaching subscribers to a conversation's stream, and detaching them.

Contract (``docs/lifecycles/stream.md`` rules 2 and 4):

* Attaching never changes the stream. A live stream gives the subscriber its replay (exact
  after a cursor the stream issued, compact otherwise) and then live chunks, with no await in
  between; an ended stream in its grace period answers with its final messages (and the error,
  including a failed final save); no stream answers not found.
* A new subscriber beyond ``max_listeners`` is refused (``too-many-subscribers``).
* ``replay_ended`` gives a resume during the grace period the ended execution's events and the
  terminal its subscribers received, without registering the listener.
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
from drupe.streaming.terminal import deliver_terminal

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
            errors = [e.error for e in stream.executions.values() if e.error is not None]
            if stream.status != "error":
                errors = []
            errors += [e.save_error for e in stream.executions.values() if e.save_error]
            return AttachFinished(
                status=stream.status,
                turn_id=stream.turn_id,
                final_messages=stream.final_messages(),
                error=errors[0] if errors else None,
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

    async def replay_ended(
        self,
        conversation_id: str,
        listener: Listener,
        *,
        execution_id: str,
        after: int | None = None,
    ) -> bool:
        """Replay an ended execution to ``listener``, then its terminal; False if none.

        For a resume during the grace period (or while the turn waits for a tool approval):
        the listener gets the same events a live subscriber got (exactly after ``after`` while
        the ring covers it, a compact replay otherwise) and then the terminal the subscribers
        received (an error when the final save failed). Waits for the execution's terminal
        work first. The listener is never registered: the stream is over.
        """
        stream = self._registry.get(conversation_id)
        if stream is None or stream.is_live:
            return False
        execution = stream.executions.get(execution_id)
        if execution is None:
            return False
        await execution.settled.wait()
        if execution.notified is None:
            return False
        for event in stream.replay_events(after=after, execution_ids=(execution_id,)):
            listener.on_chunk(event)
        await deliver_terminal(listener, execution.notified)
        return True

    def detach(self, conversation_id: str, listener_id: str) -> bool:
        """Remove a subscriber. Never aborts by itself."""
        stream = self._registry.get(conversation_id)
        if stream is None:
            return False
        return stream.remove_listener(listener_id) is not None
