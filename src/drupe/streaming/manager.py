"""``StreamManager``: the registry of live streams, and the owner of their tasks.

Contract (``docs/lifecycles/stream.md``):

* At most one live stream per conversation. ``send`` starts one, or injects listeners into the
  live one when given no models; a live conversation plus models is refused (``busy``), so a
  prepared continuation is never silently dropped. Callers serialise admissions per
  conversation with ``conversation_lock`` (the dispatcher does).
* Every execution runs as a task of the manager's task group. Its loop reads the source once and
  fans each chunk out synchronously. Classification, first match: the loop raised -> ``error``;
  aborted (stop, idle watchdog, no subscribers, shutdown) -> ``paused``; an ``error`` chunk was
  seen -> ``error`` named ``StreamError``; otherwise ``success``.
* Terminal work (listeners, persistence first) is shielded and time-bounded, and runs whatever
  the listeners do. Conversation-level effects (status record, chaining, eviction) apply only
  when the registry still maps the conversation to the same stream object.
* ``abort`` flips the status synchronously; ``abort_and_drain`` returns after the loops settled
  and their partials were persisted.
* External cancellation (shutdown) is never converted into an outcome; it propagates after the
  execution's terminal write.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

import anyio
import anyio.abc
from opentelemetry import trace

from drupe.chunks.accumulate import Accumulator
from drupe.chunks.types import Chunk
from drupe.errors import AdmissionError, DuplicateModelError
from drupe.ids import next_attempt_id, next_turn_id
from drupe.streaming.config import StreamConfig
from drupe.streaming.contracts import (
    Attached,
    AttachFinished,
    AttachNotFound,
    AttachResult,
    ExecutionSpec,
    HoldPolicy,
    Injected,
    SendInput,
    SendResult,
    Started,
    StatusObserver,
    StatusRecord,
    SteerLauncher,
)
from drupe.streaming.execution import run_execution
from drupe.streaming.lazy_event import LazyEvent
from drupe.streaming.listeners.base import (
    Listener,
    SerializedError,
    TerminalResult,
    serialize_error,
)
from drupe.streaming.live import Execution, LiveStream
from drupe.streaming.ring import ReplayRing
from drupe.streaming.status import ExecutionTerminal, StatusChanged
from drupe.streaming.steering import EnqueueDecision, PendingSteer, after_terminal, on_enqueue
from drupe.streaming.terminal import dispatch_terminal, notify_listeners

__all__ = [
    "AttachFinished",
    "AttachNotFound",
    "AttachResult",
    "Attached",
    "ExecutionSpec",
    "Injected",
    "SendInput",
    "SendResult",
    "Started",
    "StatusRecord",
    "SteerLauncher",
    "StreamManager",
]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _LockEntry:
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    refs: int = 0


class StreamManager:
    """Owns every live stream of the process. Use as an async context manager."""

    def __init__(
        self, config: StreamConfig | None = None, *, tracer: trace.Tracer | None = None
    ) -> None:
        self.config = config or StreamConfig()
        self._tracer = tracer
        self._streams: dict[str, LiveStream] = {}
        self._locks: dict[str, _LockEntry] = {}
        self._steers: dict[str, deque[PendingSteer]] = {}
        self._status: dict[str, StatusRecord] = {}
        self._observers: list[StatusObserver] = []
        self._steer_launcher: SteerLauncher | None = None
        self._hold_policies: list[HoldPolicy] = []
        self._tg: anyio.abc.TaskGroup | None = None
        self._closing = False
        self.outcomes: dict[str, int] = {"success": 0, "paused": 0, "error": 0}
        self.chunks_total = 0

    # --- lifetime ---------------------------------------------------------------------------

    async def __aenter__(self) -> StreamManager:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        self._closing = True
        assert self._tg is not None
        with anyio.move_on_after(self.config.shutdown_grace, shield=True):
            await self.shutdown()
        self._tg.cancel_scope.cancel()
        return await self._tg.__aexit__(exc_type, exc, tb)

    async def shutdown(self) -> None:
        """Abort every live stream (``app-shutdown``) and wait until their partials are saved."""
        live = [s for s in self._streams.values() if s.is_live]
        for stream in live:
            self._abort_stream(stream, "app-shutdown")
        for stream in live:
            for execution in stream.executions.values():
                await execution.settled.wait()

    @property
    def task_group(self) -> anyio.abc.TaskGroup:
        if self._tg is None:
            raise RuntimeError("StreamManager is not running (use `async with`)")
        return self._tg

    # --- wiring -----------------------------------------------------------------------------

    def set_steer_launcher(self, launcher: SteerLauncher) -> None:
        """Install the callback that dispatches a steer continuation (the dispatcher's)."""
        self._steer_launcher = launcher

    def add_hold_policy(self, policy: HoldPolicy) -> None:
        """Install a policy asked when a stream ends ``done``: True holds the stream open.

        A held stream tells its listeners ``is_conversation_done=False`` and is not evicted:
        the policy's owner (the agent-session host) must follow up with ``start_runtime_turn``
        or ``terminate_held_stream``.
        """
        self._hold_policies.append(policy)

    def add_status_observer(self, observer: StatusObserver) -> Callable[[], None]:
        """Call ``observer(conversation_id, record)`` on every status change; returns remover."""
        self._observers.append(observer)
        return lambda: self._observers.remove(observer) if observer in self._observers else None

    def conversation_lock(self, conversation_id: str) -> AbstractAsyncContextManager[None]:
        """The per-conversation admission lock (live check, row writes and start under it)."""
        return self._locked(conversation_id)

    @asynccontextmanager
    async def _locked(self, conversation_id: str) -> AsyncIterator[None]:
        entry = self._locks.get(conversation_id)
        if entry is None:
            entry = self._locks[conversation_id] = _LockEntry()
        entry.refs += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.refs -= 1
            if entry.refs == 0:
                self._locks.pop(conversation_id, None)

    # --- queries ----------------------------------------------------------------------------

    def get(self, conversation_id: str) -> LiveStream | None:
        return self._streams.get(conversation_id)

    def is_live(self, conversation_id: str) -> bool:
        stream = self._streams.get(conversation_id)
        return stream is not None and stream.is_live

    def status(self, conversation_id: str) -> StatusRecord | None:
        """The latest status record of a conversation (kept after eviction)."""
        return self._status.get(conversation_id)

    def pending_steers(self, conversation_id: str) -> list[PendingSteer]:
        return list(self._steers.get(conversation_id, ()))

    def has_pending_steer(self, conversation_id: str) -> bool:
        return bool(self._steers.get(conversation_id))

    def statistics(self) -> dict[str, Any]:
        live = [s for s in self._streams.values() if s.is_live]
        return {
            "streams": len(self._streams),
            "live_streams": len(live),
            "subscribers": sum(s.subscriber_count() for s in self._streams.values()),
            "chunks_total": self.chunks_total,
            "outcomes": dict(self.outcomes),
        }

    async def wait_terminal_idle(self, conversation_id: str) -> None:
        """Wait until no terminal dispatch of this conversation's stream is in flight."""
        stream = self._streams.get(conversation_id)
        if stream is not None:
            await stream.terminal_idle.wait()

    async def wait_settled(self, conversation_id: str) -> None:
        """Wait until every execution of the current stream has finished its terminal work."""
        stream = self._streams.get(conversation_id)
        if stream is not None:
            for execution in list(stream.executions.values()):
                await execution.settled.wait()

    # --- send -------------------------------------------------------------------------------

    def send(self, request: SendInput) -> SendResult:
        """Start a stream, or inject listeners into the live one (reference §2.4 step 1)."""
        if self._closing:
            raise AdmissionError("shutting-down", "the server is shutting down")
        model_ids = [spec.model_id for spec in request.executions]
        seen: set[str] = set()
        for model_id in model_ids:
            if model_id in seen:
                raise DuplicateModelError(model_id)
            seen.add(model_id)
        conversation_id = request.conversation_id
        current = self._streams.get(conversation_id)
        if current is not None and current.is_live:
            if request.executions:
                raise AdmissionError(
                    "busy", f"conversation {conversation_id!r} already has a live stream"
                )
            for listener in request.listeners:
                self._attach_listener(current, listener, after=None, execution_ids=None)
            return Injected("injected", current.turn_id, self._streaming_ids(current))
        if not request.executions:
            if current is not None:
                for listener in request.listeners:
                    self._attach_listener(current, listener, after=None, execution_ids=None)
            return Injected("injected", current.turn_id if current else None, ())
        if current is not None:
            self._evict(current)
        stream = self._start(request)
        return Started(
            "started",
            stream.turn_id,
            tuple(stream.executions),
            tuple(e.attempt_id for e in stream.executions.values()),
        )

    def _start(self, request: SendInput) -> LiveStream:
        executions = [
            Execution(
                execution_id=spec.model_id,
                model_id=spec.model_id,
                attempt_id=next_attempt_id(),
                anchor_message_id=spec.anchor_message_id,
                source=spec.source,
                ring=ReplayRing(
                    max_entries=self.config.max_buffer_chunks,
                    max_delta_bytes=self.config.max_delta_bytes,
                ),
                accumulator=Accumulator(seed=spec.seed_message),
                seed_message=spec.seed_message,
            )
            for spec in request.executions
        ]
        stream = LiveStream(
            conversation_id=request.conversation_id,
            turn_id=next_turn_id(),
            executions=executions,
            config=self.config,
            siblings_group_id=request.siblings_group_id,
            persistent=request.persistent,
            grace_period=(
                self.config.grace_period if request.grace_period is None else request.grace_period
            ),
            on_status=self._on_status,
            on_no_subscribers=self._on_no_subscribers,
        )
        if len(request.listeners) > self.config.max_listeners:
            raise AdmissionError("too-many-subscribers", "too many listeners for one stream")
        for listener in request.listeners:
            stream.add_listener(listener)
        self._streams[request.conversation_id] = stream
        self._record(stream, "pending")
        for execution in executions:
            self.task_group.start_soon(
                self._run_execution, stream, execution, name=f"execution {execution.attempt_id}"
            )
        return stream

    @staticmethod
    def _streaming_ids(stream: LiveStream) -> tuple[str, ...]:
        return tuple(e.execution_id for e in stream.executions.values() if e.status == "streaming")

    # --- attach / detach --------------------------------------------------------------------

    def attach(
        self,
        conversation_id: str,
        listener: Listener,
        *,
        after: int | None = None,
        execution_ids: Iterable[str] | None = None,
    ) -> AttachResult:
        """Attach a subscriber: replay then live chunks; final messages in grace; not found.

        Attaching never changes the stream. ``after`` is a sequence number this stream issued
        (the SSE cursor): the replay then starts exactly after it.
        """
        stream = self._streams.get(conversation_id)
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
        replayed = self._attach_listener(stream, listener, after=after, execution_ids=execution_ids)
        return Attached(stream.turn_id, replayed, self._streaming_ids(stream))

    def _attach_listener(
        self,
        stream: LiveStream,
        listener: Listener,
        *,
        after: int | None,
        execution_ids: Iterable[str] | None,
    ) -> int:
        if (
            listener.listener_id not in stream.listeners
            and listener.terminal_phase is None
            and stream.subscriber_count() >= self.config.max_listeners
        ):
            raise AdmissionError(
                "too-many-subscribers",
                f"conversation {stream.conversation_id!r} already has "
                f"{self.config.max_listeners} subscribers",
            )
        # Replay and registration happen with no await in between: nothing is lost or doubled.
        events = stream.replay_events(after=after, execution_ids=execution_ids)
        for event in events:
            listener.on_chunk(event)
        stream.add_listener(listener)
        return len(events)

    def detach(self, conversation_id: str, listener_id: str) -> bool:
        """Remove a subscriber. Never aborts (unless ``background_mode`` is ``abort``)."""
        stream = self._streams.get(conversation_id)
        if stream is None:
            return False
        return stream.remove_listener(listener_id) is not None

    def _on_no_subscribers(self, stream: LiveStream) -> None:
        if self.config.background_mode == "abort" and stream.is_live:
            log.info("last subscriber of %r left; aborting", stream.conversation_id)
            self._abort_stream(stream, "no-subscribers")

    # --- abort ------------------------------------------------------------------------------

    def abort(self, conversation_id: str, reason: str = "user-stop") -> bool:
        """Stop every streaming execution; the status flips to ``aborted`` synchronously."""
        stream = self._streams.get(conversation_id)
        if stream is None or not stream.is_live:
            return False
        self._abort_stream(stream, reason)
        return True

    def _abort_stream(self, stream: LiveStream, reason: str) -> None:
        from drupe.streaming.status import Abort

        for execution in stream.executions.values():
            execution.request_abort(reason)
        stream.apply(Abort())

    async def abort_and_drain(self, conversation_id: str, reason: str = "user-stop") -> bool:
        """Abort, then return only after the loops settled and their partials were persisted."""
        async with self.conversation_lock(conversation_id):
            stream = self._streams.get(conversation_id)
            aborted = self.abort(conversation_id, reason)
            if stream is not None:
                for execution in list(stream.executions.values()):
                    await execution.settled.wait()
            return aborted

    # --- execution loop ---------------------------------------------------------------------

    async def _run_execution(self, stream: LiveStream, execution: Execution) -> None:
        await run_execution(
            stream,
            execution,
            config=self.config,
            tracer=self._tracer,
            finish=self._finish,
            counted=self._count_chunk,
        )

    def _count_chunk(self) -> None:
        self.chunks_total += 1

    # --- terminal ---------------------------------------------------------------------------

    async def _finish(
        self,
        stream: LiveStream,
        execution: Execution,
        outcome: Literal["done", "paused", "error"],
        error: SerializedError | None,
        reason: str | None,
    ) -> None:
        execution.completed_at = time.time()
        if execution.status == "streaming":
            execution.status = {"done": "done", "paused": "aborted", "error": "error"}[outcome]
        status = {"done": "success", "paused": "paused", "error": "error"}[outcome]
        execution.terminal_status = status
        execution.error = error
        has_content = execution.chunk_count > 0 or execution.seed_message is not None
        execution.final_message = execution.snapshot() if has_content else None
        stream.apply(ExecutionTerminal(execution.execution_id, outcome))
        self.outcomes[status] = self.outcomes.get(status, 0) + 1

        fresh = self._streams.get(stream.conversation_id) is stream
        all_done = all(e.terminal_status is not None for e in stream.executions.values())
        decision = "none"
        if all_done and fresh:
            queue = self._steers.get(stream.conversation_id)
            decision = after_terminal(stream.status, len(queue) if queue else 0)
            if decision == "chain":
                stream.chaining = True
            elif stream.status == "done" and any(
                policy(stream.conversation_id) for policy in self._hold_policies
            ):
                stream.chaining = True
                decision = "hold"
            elif decision == "drop":
                dropped = self._steers.pop(stream.conversation_id, None)
                log.info(
                    "dropped %d queued steer(s) of %r after %s",
                    len(dropped or ()),
                    stream.conversation_id,
                    stream.status,
                )
        result = TerminalResult(
            status=status,  # type: ignore[arg-type]
            conversation_id=stream.conversation_id,
            turn_id=stream.turn_id,
            execution_id=execution.execution_id,
            model_id=execution.model_id,
            attempt_id=execution.attempt_id,
            anchor_message_id=execution.anchor_message_id,
            final_message=execution.final_message,
            is_conversation_done=all_done and not stream.chaining,
            error=error,
            reason=reason,
            timings={
                "startedAt": execution.started_at * 1000,
                "firstChunkAt": (execution.first_chunk_at or 0) * 1000,
                "completedAt": execution.completed_at * 1000,
            },
        )
        stream.terminal_inflight += 1
        if stream.terminal_inflight == 1:
            stream.terminal_idle = LazyEvent()
        try:
            with anyio.move_on_after(self.config.terminal_timeout, shield=True) as bound:
                await dispatch_terminal(stream, result)
            if bound.cancelled_caught:
                log.error(
                    "terminal work of %r (execution %r) exceeded %.0f s",
                    stream.conversation_id,
                    execution.execution_id,
                    self.config.terminal_timeout,
                )
        finally:
            stream.terminal_inflight -= 1
            if stream.terminal_inflight == 0:
                stream.terminal_idle.set()
            execution.settled.set()
        if all_done and fresh:
            if stream.status == "done":
                record = self._status.get(stream.conversation_id)
                if record is not None and record.turn_id == stream.turn_id:
                    record.last_completed_at = time.time()
            if decision == "chain":
                self.task_group.start_soon(self._start_next_chat_turn, stream.conversation_id)
            elif decision != "hold":
                self._schedule_eviction(stream)

    # --- status -----------------------------------------------------------------------------

    def _on_status(self, stream: LiveStream, change: StatusChanged) -> None:
        if self._streams.get(stream.conversation_id) is not stream:
            return
        self._record(stream, change.status)

    def _record(self, stream: LiveStream, status: str) -> None:
        previous = self._status.get(stream.conversation_id)
        record = StatusRecord(
            status=status,
            turn_id=stream.turn_id,
            last_completed_at=previous.last_completed_at if previous else None,
        )
        self._status[stream.conversation_id] = record
        for observer in list(self._observers):
            try:
                observer(stream.conversation_id, record)
            except Exception:  # isolation boundary: status observers
                log.exception("status observer raised")

    def forget(self, conversation_id: str) -> None:
        """Drop every trace of a conversation (after it was deleted)."""
        stream = self._streams.pop(conversation_id, None)
        if stream is not None:
            stream.evicted.set()
        self._status.pop(conversation_id, None)
        self._steers.pop(conversation_id, None)

    # --- eviction ---------------------------------------------------------------------------

    def _schedule_eviction(self, stream: LiveStream) -> None:
        if stream.grace_period <= 0:
            self._evict(stream)
            return
        stream.expires_at = time.time() + stream.grace_period
        self.task_group.start_soon(self._evict_later, stream)

    async def _evict_later(self, stream: LiveStream) -> None:
        with anyio.move_on_after(stream.grace_period):
            await stream.evicted.wait()  # forget() or a successor ends the wait early
        self._evict(stream)

    def _evict(self, stream: LiveStream) -> None:
        if self._streams.get(stream.conversation_id) is stream:
            del self._streams[stream.conversation_id]
        stream.evicted.set()

    # --- runtime-driven turns (agent sessions) -------------------------------------------------

    def carried_listeners(self, conversation_id: str) -> list[Listener]:
        """The subscribers a successor turn inherits (no persistence or runtime listeners)."""
        stream = self._streams.get(conversation_id)
        if stream is None:
            return []
        return [
            item
            for item in stream.listeners.values()
            if item.terminal_phase is None
            and not item.listener_id.startswith(("persistence:", "agent-runtime:"))
        ]

    def start_runtime_turn(self, request: SendInput) -> Started:
        """Start a successor turn that inherits the previous stream's subscribers.

        Used by a runtime host for follow-ups and steer continuations: the held (or grace)
        stream is evicted and its subscribers are attached to the new stream, each receiving
        its replay, so they never see an end between the two turns.
        """
        carried = self.carried_listeners(request.conversation_id)
        current = self._streams.get(request.conversation_id)
        if current is not None and current.is_live:
            raise AdmissionError(
                "busy", f"conversation {request.conversation_id!r} already has a live stream"
            )
        if current is not None:
            current.chaining = False
            self._evict(current)
        ids = {item.listener_id for item in request.listeners}
        listeners = [*request.listeners, *(c for c in carried if c.listener_id not in ids)]
        result = self.send(
            SendInput(
                conversation_id=request.conversation_id,
                executions=request.executions,
                listeners=listeners,
                siblings_group_id=request.siblings_group_id,
                persistent=request.persistent,
            )
        )
        assert isinstance(result, Started)
        return result

    async def terminate_held_stream(self, conversation_id: str, error: SerializedError) -> None:
        """End a held stream whose successor cannot launch: error its subscribers, then evict."""
        stream = self._streams.get(conversation_id)
        carried = self.carried_listeners(conversation_id)
        if stream is not None:
            stream.chaining = False
            self._evict(stream)
        await self._fail_launch(conversation_id, stream, carried, _SerializedFailure(error))

    # --- chat steering ----------------------------------------------------------------------

    def enqueue_pending_steer(self, conversation_id: str, steer: PendingSteer) -> EnqueueDecision:
        """Queue a persisted steer row; decide from the stream status (reference §5.1)."""
        stream = self._streams.get(conversation_id)
        decision = on_enqueue(stream.status if stream is not None else None)
        if decision == "drop":
            log.info("steer %r dropped: the turn already ended", steer.user_message_id)
            return decision
        self._steers.setdefault(conversation_id, deque()).append(steer)
        if decision == "queue-and-start":
            self.task_group.start_soon(self._start_next_chat_turn, conversation_id)
        return decision

    def drop_pending_steers(self, conversation_id: str) -> list[PendingSteer]:
        return list(self._steers.pop(conversation_id, ()))

    def take_pending_steer(self, conversation_id: str) -> PendingSteer | None:
        """Shift the head of the queue (used by the approval continuation to drain it)."""
        queue = self._steers.get(conversation_id)
        if not queue:
            return None
        steer = queue.popleft()
        if not queue:
            self._steers.pop(conversation_id, None)
        return steer

    async def _start_next_chat_turn(self, conversation_id: str) -> None:
        async with self.conversation_lock(conversation_id):
            stream = self._streams.get(conversation_id)
            if stream is not None and stream.is_live:
                return  # that turn's own terminal decides
            steer = self.take_pending_steer(conversation_id)
            if steer is None:
                if stream is not None and stream.chaining:
                    stream.chaining = False
                    self._schedule_eviction(stream)
                return
            carried = self.carried_listeners(conversation_id)
            if stream is not None:
                self._evict(stream)
            launcher = self._steer_launcher
            try:
                if launcher is None:
                    raise RuntimeError("no steer launcher is installed")
                await launcher(conversation_id, steer, carried)
            except Exception as err:  # isolation boundary: continuation launch failure
                log.exception("steer continuation of %r failed to launch", conversation_id)
                await self._fail_launch(conversation_id, stream, carried, err)

    async def _fail_launch(
        self,
        conversation_id: str,
        previous: LiveStream | None,
        carried: Sequence[Listener],
        err: Exception,
    ) -> None:
        self._steers.pop(conversation_id, None)
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
            error=err.error if isinstance(err, _SerializedFailure) else serialize_error(err),
        )
        await notify_listeners(carried, result, limit=self.config.terminal_timeout)
        previous_record = self._status.get(conversation_id)
        record = StatusRecord(
            status="error",
            turn_id=turn_id,
            last_completed_at=previous_record.last_completed_at if previous_record else None,
        )
        self._status[conversation_id] = record
        for observer in list(self._observers):
            try:
                observer(conversation_id, record)
            except Exception:  # isolation boundary: status observers
                log.exception("status observer raised")


class _SerializedFailure(Exception):
    def __init__(self, error: SerializedError) -> None:
        super().__init__(error.get("message", ""))
        self.error = error


def chunks_of(events: Iterable[Any]) -> list[Chunk]:
    """The chunks of a list of ``StreamEvent`` (test and demo convenience)."""
    return [event.chunk for event in events]
