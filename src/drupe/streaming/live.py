"""``LiveStream`` and ``Execution``: the in-memory state of one conversation's stream.

A live stream holds one execution per model, the shared listener set and the pure status state.
It performs the synchronous fan-out (``publish``) and late-attach replay (``replay_to``); it never
awaits. The manager owns its tasks and its terminal work.

Fan-out contract: a chunk is accepted only from the execution object the stream registered
(same attempt id) while that execution is streaming; it is folded into the execution's
accumulator (a chunk the accumulator rejects is left out of the message and recorded in one
``data-error`` part, ``drupe.chunks.rejections``; later chunks are still folded), buffered in
its ring, and handed to every live listener in registration order on the producer's task. A
listener that raises is removed (and logged with its id). At its terminal every execution's
end chunk (``finish``/``abort``/``error``) is fanned out the same way, with its own cursor,
unless the source streamed it (``publish_terminal``): every event of a turn has a unique,
strictly increasing sequence number.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio

from drupe.chunks.accumulate import Accumulator
from drupe.chunks.message_chunks import message_to_chunks
from drupe.chunks.rejections import push_or_record
from drupe.chunks.replay import compact_replay
from drupe.chunks.types import Chunk, UIMessage
from drupe.errors import AdmissionError
from drupe.streaming.config import StreamConfig
from drupe.streaming.lazy_event import LazyEvent
from drupe.streaming.listeners.base import Listener, SerializedError, StreamEvent, TerminalResult
from drupe.streaming.ring import ReplayRing
from drupe.streaming.status import (
    ApprovalRequested,
    ApprovalResolved,
    ChunkSeen,
    StatusChanged,
    StatusEvent,
    StatusState,
    initial_state,
    reduce,
)

__all__ = ["Execution", "LiveStream", "SourceFactory"]

log = logging.getLogger(__name__)

SourceFactory = Callable[[], AsyncIterator[Chunk]]
_TOOL_DONE = frozenset(("tool-output-available", "tool-output-error", "tool-output-denied"))
_ENDS = frozenset(("finish", "abort", "error"))


@dataclass(eq=False, slots=True, kw_only=True)
class Execution:
    """One model's answer inside a turn."""

    execution_id: str
    model_id: str
    attempt_id: int
    anchor_message_id: str | None
    source: SourceFactory
    ring: ReplayRing
    accumulator: Accumulator
    seed_message: UIMessage | None = None
    status: str = "streaming"
    abort_reason: str | None = None
    scope: anyio.CancelScope | None = None
    pending_approvals: set[str] = field(default_factory=set)
    stream_error_text: str | None = None
    rejected_chunks: int = 0
    """Chunks the accumulator rejected (left out of the message, recorded in a ``data-error``)."""
    ends_seen: set[str] = field(default_factory=set)
    """The ``finish``/``abort``/``error`` chunks the source streamed itself."""
    chunk_count: int = 0
    started_at: float = field(default_factory=time.time)
    first_chunk_at: float | None = None
    completed_at: float | None = None
    final_message: UIMessage | None = None
    terminal_status: str | None = None
    error: SerializedError | None = None
    save_error: SerializedError | None = None
    """Set when the final save of this execution's answer failed (the message stays here)."""
    notified: TerminalResult | None = None
    """The terminal its subscribers received (replayed to a resume during the grace period)."""
    settled: LazyEvent = field(default_factory=LazyEvent)
    """Set once the execution's terminal work (persistence included) is finished."""

    def request_abort(self, reason: str) -> None:
        """Record ``reason`` and cancel the loop's scope (or mark it for cancellation)."""
        if self.status != "streaming":
            return
        self.status = "aborted"
        self.abort_reason = reason
        if self.scope is not None:
            self.scope.cancel()

    def snapshot(self) -> UIMessage:
        """The accumulated message so far (synthetic empty one before any chunk)."""
        if self.chunk_count == 0 and self.seed_message is None:
            return {"id": self.anchor_message_id or "", "role": "assistant", "parts": []}
        return self.accumulator.snapshot()


class LiveStream:
    """The registry entry of one conversation: executions, listeners and status."""

    def __init__(
        self,
        *,
        conversation_id: str,
        turn_id: str,
        executions: list[Execution],
        config: StreamConfig,
        siblings_group_id: int | None,
        persistent: bool,
        grace_period: float,
        on_status: Callable[[LiveStream, StatusChanged], None],
        on_no_subscribers: Callable[[LiveStream], None],
    ) -> None:
        self.conversation_id = conversation_id
        self.turn_id = turn_id
        self.executions: dict[str, Execution] = {e.execution_id: e for e in executions}
        self.config = config
        self.siblings_group_id = siblings_group_id
        self.persistent = persistent
        self.grace_period = grace_period
        self.listeners: dict[str, Listener] = {}
        self._fanout: tuple[Listener, ...] = ()
        self._subscribers = 0
        self.state: StatusState = initial_state([e.execution_id for e in executions])
        self.seq = 0
        self.terminal_inflight = 0
        self.terminal_idle = LazyEvent()
        self.terminal_idle.set()
        self.evicted = LazyEvent()
        """Set when the stream leaves the registry (grace period over, or replaced)."""
        self.chaining = False
        self.created_at = time.time()
        self._on_status = on_status
        self._on_no_subscribers = on_no_subscribers

    # --- status -----------------------------------------------------------------------------

    @property
    def status(self) -> str:
        return self.state.status

    @property
    def is_live(self) -> bool:
        return self.state.status in ("pending", "streaming")

    def apply(self, event: StatusEvent) -> None:
        """Feed the pure status reducer and perform its effects."""
        self.state, effects = reduce(self.state, event)
        for effect in effects:
            self._on_status(self, effect)

    # --- listeners --------------------------------------------------------------------------

    def subscriber_count(self) -> int:
        """Listeners that are subscribers (not persistence or cleanup); O(1)."""
        return self._subscribers

    def add_listener(self, listener: Listener) -> None:
        """Register (or replace, by id) a listener; no replay (see ``replay_events``)."""
        previous = self.listeners.get(listener.listener_id)
        if previous is not None and previous.terminal_phase is None:
            self._subscribers -= 1
        self.listeners[listener.listener_id] = listener
        if listener.terminal_phase is None:
            self._subscribers += 1
        self._fanout = tuple(self.listeners.values())

    def attach_listener(
        self,
        listener: Listener,
        *,
        after: int | None,
        execution_ids: Iterable[str] | None,
        max_subscribers: int,
    ) -> int:
        """Replay to ``listener``, then register it; returns how many events were replayed.

        Replay and registration happen with no await in between: nothing is lost or doubled.
        A new subscriber beyond ``max_subscribers`` is refused (``too-many-subscribers``).
        """
        if (
            listener.listener_id not in self.listeners
            and listener.terminal_phase is None
            and self._subscribers >= max_subscribers
        ):
            raise AdmissionError(
                "too-many-subscribers",
                f"conversation {self.conversation_id!r} already has {max_subscribers} subscribers",
            )
        events = self.replay_events(after=after, execution_ids=execution_ids)
        for event in events:
            listener.on_chunk(event)
        self.add_listener(listener)
        return len(events)

    def remove_listener(self, listener_id: str) -> Listener | None:
        removed = self.listeners.pop(listener_id, None)
        if removed is not None:
            self._fanout = tuple(self.listeners.values())
            if removed.terminal_phase is None:
                self._subscribers -= 1
                if self._subscribers == 0:
                    self._on_no_subscribers(self)
        return removed

    def ordered_listeners(self) -> list[Listener]:
        """Persistence phase first, then unphased, then cleanup (terminal dispatch order)."""
        rank = {"persistence": 0, None: 1, "cleanup": 2}
        return sorted(self.listeners.values(), key=lambda item: rank[item.terminal_phase])

    # --- fan-out ----------------------------------------------------------------------------

    def publish(self, execution: Execution, chunk: Chunk) -> bool:
        """Fan ``chunk`` out from ``execution``; False when it was dropped as stale."""
        if (
            execution.status != "streaming"
            or self.executions.get(execution.execution_id) is not execution
        ):
            return False
        ctype = chunk["type"]
        if ctype == "tool-approval-request":
            execution.pending_approvals.add(chunk["toolCallId"])
            execution.ring.pinned = True
            self.apply(ApprovalRequested(execution.execution_id, chunk["toolCallId"]))
        elif ctype in _TOOL_DONE and execution.pending_approvals:
            execution.pending_approvals.discard(chunk["toolCallId"])
            self.apply(ApprovalResolved(execution.execution_id, chunk["toolCallId"]))
            if not execution.pending_approvals:
                execution.ring.unpin()
        elif ctype == "error" and execution.stream_error_text is None:
            execution.stream_error_text = str(chunk.get("errorText", ""))
        if ctype in _ENDS:
            execution.ends_seen.add(ctype)
        rejected = execution.rejected_chunks
        execution.rejected_chunks = push_or_record(execution.accumulator, chunk, rejected)
        if execution.rejected_chunks != rejected:
            log.warning(
                "accumulator rejected a %r chunk of %r (execution %r); left out, recorded",
                ctype,
                self.conversation_id,
                execution.execution_id,
            )
        self.seq += 1
        seq = self.seq
        if not chunk.get("transient"):
            execution.ring.append(seq, chunk)
        execution.chunk_count += 1
        if execution.first_chunk_at is None:
            execution.first_chunk_at = time.time()
            self.apply(ChunkSeen(execution.execution_id))
        event = StreamEvent(
            conversation_id=self.conversation_id,
            turn_id=self.turn_id,
            execution_id=execution.execution_id,
            attempt_id=execution.attempt_id,
            anchor_message_id=execution.anchor_message_id,
            seq=seq,
            chunk=chunk,
            accumulator=execution.accumulator,
        )
        self._deliver(event)
        return True

    def publish_terminal(
        self, execution: Execution, status: str, error: SerializedError | None = None
    ) -> None:
        """Fan out the terminal chunk of ``execution`` with its OWN cursor.

        ``finish`` (success), ``abort`` (paused) or ``error`` (with the error's text), unless
        the source streamed it already. It takes the next sequence number and enters the ring,
        so every event of a turn has a unique, strictly increasing cursor and a reader that
        resumes after the last content chunk still gets the end (issue 8 point 3).
        """
        seen = execution.ends_seen
        chunk: Chunk
        if status == "success":
            if "finish" in seen:
                return
            chunk = {"type": "finish"}
        elif status == "paused":
            if seen & {"abort", "finish"}:
                return
            chunk = {"type": "abort"}
        else:
            if "error" in seen:
                return
            text = (error or {}).get("message") or (error or {}).get("name") or status
            chunk = {"type": "error", "errorText": str(text)}
        seen.add(chunk["type"])
        self.seq += 1
        execution.ring.append(self.seq, chunk)
        self._deliver(self._event(execution, self.seq, chunk))

    def _deliver(self, event: StreamEvent) -> None:
        dead: list[str] | None = None
        for listener in self._fanout:
            if not listener.is_alive():
                (dead := dead or []).append(listener.listener_id)
                continue
            try:
                listener.on_chunk(event)
            except Exception:  # isolation boundary: one listener never breaks the fan-out
                log.exception("listener %r raised in on_chunk; removed", listener.listener_id)
                (dead := dead or []).append(listener.listener_id)
        if dead:
            for listener_id in dead:
                self.remove_listener(listener_id)

    # --- replay -----------------------------------------------------------------------------

    def replay_events(
        self, *, after: int | None = None, execution_ids: Iterable[str] | None = None
    ) -> list[StreamEvent]:
        """Events a late subscriber needs before the live ones.

        With ``after`` (a sequence number this stream issued) the replay is exact when the ring
        still covers it; otherwise it is a compact replay from the message start. Compact replay
        events carry ``seq = 0`` (no cursor) except the last, which carries the stream's current
        sequence number, so a reader that drops mid-replay resumes from its previous cursor.
        """
        wanted = set(execution_ids) if execution_ids is not None else None
        out: list[StreamEvent] = []
        exact: list[StreamEvent] = []
        for execution in self.executions.values():
            if wanted is not None and execution.execution_id not in wanted:
                continue
            if after is not None and after > 0 and execution.ring.covers(after):
                exact.extend(
                    self._event(execution, seq, chunk)
                    for seq, chunk in execution.ring.entries_after(after)
                )
                continue
            if not execution.ring.entries and execution.seed_message is None:
                continue  # nothing happened yet: the live ``start`` will come
            chunks = compact_replay(execution.ring.chunks(), seed=execution.seed_message)
            if execution.seed_message is not None:
                # A resuming client holds no seed: rebuild the continued message first.
                chunks = [*message_to_chunks(execution.seed_message), *chunks]
            out.extend(self._event(execution, 0, chunk) for chunk in chunks)
        # Exact events interleave by sequence number, so a cursor taken mid-replay is sound.
        exact.sort(key=lambda event: event.seq)
        out.extend(exact)
        if out and out[-1].seq == 0:
            last = out[-1]
            out[-1] = self._event(self.executions[last.execution_id], self.seq, last.chunk)
        return out

    def _event(self, execution: Execution, seq: int, chunk: Chunk) -> StreamEvent:
        return StreamEvent(
            conversation_id=self.conversation_id,
            turn_id=self.turn_id,
            execution_id=execution.execution_id,
            attempt_id=execution.attempt_id,
            anchor_message_id=execution.anchor_message_id,
            seq=seq,
            chunk=chunk,
            accumulator=execution.accumulator,
        )

    def final_messages(self) -> dict[str, UIMessage]:
        """Per-execution final (or current) messages."""
        return {
            e.execution_id: (e.final_message if e.final_message is not None else e.snapshot())
            for e in self.executions.values()
        }

    def statistics(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "turn_id": self.turn_id,
            "status": self.status,
            "listeners": len(self.listeners),
            "subscribers": self.subscriber_count(),
            "seq": self.seq,
            "executions": {
                e.execution_id: {
                    "attempt_id": e.attempt_id,
                    "status": e.status,
                    "chunks": e.chunk_count,
                    "buffered": len(e.ring),
                    "dropped": e.ring.dropped,
                    "pending_approvals": sorted(e.pending_approvals),
                }
                for e in self.executions.values()
            },
        }
