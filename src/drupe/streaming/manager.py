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
from collections.abc import Callable, Coroutine, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal

import anyio
import anyio.abc
from opentelemetry import trace

from drupe.errors import AdmissionError, DuplicateModelError
from drupe.ids import next_turn_id
from drupe.lifetimes import TaskOwner
from drupe.streaming.chaining import SteerChain
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
from drupe.streaming.execution import new_execution, run_execution
from drupe.streaming.idle_watch import IdleWatch
from drupe.streaming.listeners.base import Listener, SerializedError
from drupe.streaming.live import Execution, LiveStream
from drupe.streaming.locks import ConversationLocks
from drupe.streaming.registry import StreamRegistry
from drupe.streaming.runtime_turns import RuntimeTurns
from drupe.streaming.status import Abort, StatusChanged
from drupe.streaming.status_book import StatusBook
from drupe.streaming.steering import TerminalDecision
from drupe.streaming.subscriptions import Subscriptions, streaming_ids
from drupe.streaming.terminal import run_terminal, settle_execution, terminal_result

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


class StreamManager(TaskOwner):
    """Owns every live stream of the process. Use as an async context manager.

    Composed of collaborators with explicit state: ``registry`` (streams and eviction),
    ``status_book`` (status records and observers), ``steers`` (chat steer chaining) and
    ``runtime_turns`` (hold policies and runtime-driven successor turns).
    """

    def __init__(
        self,
        config: StreamConfig | None = None,
        *,
        tracer: trace.Tracer | None = None,
        stream_listeners: Sequence[Callable[[str], Listener]] = (),
    ) -> None:
        self.config = config or StreamConfig()
        self._tracer = tracer
        self._locks = ConversationLocks()
        self._stream_listeners = list(stream_listeners)
        """Factories of listeners every started stream gets (e.g. the trace flush)."""
        self._closing = False
        self.registry = StreamRegistry(self._spawn)
        self.status_book = StatusBook(
            max_records=self.config.max_status_records, pinned=self.registry.__contains__
        )
        self.steers = SteerChain(
            registry=self.registry,
            book=self.status_book,
            lock=self.conversation_lock,
            spawn=self._spawn,
            terminal_timeout=self.config.terminal_timeout,
        )
        self.subscriptions = Subscriptions(self.registry, self.config)
        self.idle_watch = IdleWatch(self.config, self._spawn)
        """The idle watchdog of every streaming execution (one task, no timer per execution)."""
        self.runtime_turns = RuntimeTurns(registry=self.registry, chain=self.steers, send=self.send)
        self.outcomes: dict[str, int] = {"success": 0, "paused": 0, "error": 0}
        self.chunks_total = 0
        self.save_failures = 0
        """Terminals whose final save failed (subscribers got an ``error`` end)."""

    # --- lifetime ---------------------------------------------------------------------------

    async def _start_tasks(self, group: anyio.abc.TaskGroup) -> None:
        return None  # streams start their tasks as they are sent

    async def _before_cancel(self) -> None:
        self._closing = True
        with anyio.move_on_after(self.config.shutdown_grace, shield=True):
            await self.shutdown()

    async def shutdown(self) -> None:
        """Abort every live stream (``app-shutdown``) and wait until their partials are saved."""
        live = [s for s in self.registry if s.is_live]
        for stream in live:
            self._abort_stream(stream, "app-shutdown")
        for stream in live:
            for execution in stream.executions.values():
                await execution.settled.wait()

    def _spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], /, *args: Any) -> None:
        self.task_group.start_soon(fn, *args)

    # --- wiring -----------------------------------------------------------------------------

    def set_steer_launcher(self, launcher: SteerLauncher) -> None:
        """Install the callback that dispatches a steer continuation (the dispatcher's)."""
        self.steers.launcher = launcher

    def add_hold_policy(self, policy: HoldPolicy) -> None:
        """Install a policy asked when a stream ends ``done``: True holds the stream open.

        A held stream tells its listeners ``is_conversation_done=False`` and is not evicted:
        the policy's owner (the agent-session host) must follow up with ``start_runtime_turn``
        or ``terminate_held_stream``.
        """
        self.runtime_turns.policies.append(policy)

    def add_status_observer(self, observer: StatusObserver) -> Callable[[], None]:
        """Call ``observer(conversation_id, record)`` on every status change; returns remover."""
        return self.status_book.add_observer(observer)

    def conversation_lock(self, conversation_id: str) -> AbstractAsyncContextManager[None]:
        """The per-conversation admission lock (live check, row writes and start under it)."""
        return self._locks.lock(conversation_id)

    # --- queries ----------------------------------------------------------------------------

    def get(self, conversation_id: str) -> LiveStream | None:
        return self.registry.get(conversation_id)

    @property
    def closing(self) -> bool:
        """True once shutdown began: ``send`` refuses new streams (``AdmissionError``)."""
        return self._closing

    def is_live(self, conversation_id: str) -> bool:
        stream = self.registry.get(conversation_id)
        return stream is not None and stream.is_live

    def status(self, conversation_id: str) -> StatusRecord | None:
        """The latest status record of a conversation (kept after eviction)."""
        return self.status_book.get(conversation_id)

    def has_pending_steer(self, conversation_id: str) -> bool:
        return self.steers.queue_length(conversation_id) > 0

    def statistics(self) -> dict[str, Any]:
        streams = list(self.registry)
        return {
            "streams": len(streams),
            "live_streams": sum(1 for s in streams if s.is_live),
            "subscribers": sum(s.subscriber_count() for s in streams),
            "chunks_total": self.chunks_total,
            "outcomes": dict(self.outcomes),
            "status_records": len(self.status_book),
            "save_failures": self.save_failures,
        }

    async def wait_terminal_idle(self, conversation_id: str) -> None:
        """Wait until no terminal dispatch of this conversation's stream is in flight."""
        stream = self.registry.get(conversation_id)
        if stream is not None:
            await stream.terminal_idle.wait()

    async def wait_settled(self, conversation_id: str) -> None:
        """Wait until every execution of the current stream has finished its terminal work."""
        stream = self.registry.get(conversation_id)
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
        current = self.registry.get(conversation_id)
        if current is not None and current.is_live:
            if request.executions:
                raise AdmissionError(
                    "busy", f"conversation {conversation_id!r} already has a live stream"
                )
            self.subscriptions.inject(current, request.listeners)
            return Injected("injected", current.turn_id, streaming_ids(current))
        if not request.executions:
            if current is not None:
                self.subscriptions.inject(current, request.listeners)
            return Injected("injected", current.turn_id if current else None, ())
        if current is not None:
            self.registry.evict(current)
        stream = self._start(request)
        return Started(
            "started",
            stream.turn_id,
            tuple(stream.executions),
        )

    def _start(self, request: SendInput) -> LiveStream:
        executions = [new_execution(spec, self.config) for spec in request.executions]
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
        for factory in self._stream_listeners:
            stream.add_listener(factory(request.conversation_id))
        self.registry.register(stream)
        self.status_book.record(request.conversation_id, "pending", stream.turn_id)
        for execution in executions:
            self.task_group.start_soon(
                self._run_execution, stream, execution, name=f"execution {execution.attempt_id}"
            )
        return stream

    # --- attach / detach --------------------------------------------------------------------

    def attach(
        self,
        conversation_id: str,
        listener: Listener,
        *,
        after: int | None = None,
        execution_ids: Iterable[str] | None = None,
    ) -> AttachResult:
        """Attach a subscriber (see ``Subscriptions.attach``); never changes the stream."""
        return self.subscriptions.attach(
            conversation_id, listener, after=after, execution_ids=execution_ids
        )

    def detach(self, conversation_id: str, listener_id: str) -> bool:
        """Remove a subscriber. Never aborts (unless ``background_mode`` is ``abort``)."""
        return self.subscriptions.detach(conversation_id, listener_id)

    def _on_no_subscribers(self, stream: LiveStream) -> None:
        if self.config.background_mode == "abort" and stream.is_live:
            log.info("last subscriber of %r left; aborting", stream.conversation_id)
            self._abort_stream(stream, "no-subscribers")

    # --- abort ------------------------------------------------------------------------------

    def abort(self, conversation_id: str, reason: str = "user-stop") -> bool:
        """Stop every streaming execution; the status flips to ``aborted`` synchronously."""
        stream = self.registry.get(conversation_id)
        if stream is None or not stream.is_live:
            return False
        self._abort_stream(stream, reason)
        return True

    def _abort_stream(self, stream: LiveStream, reason: str) -> None:
        for execution in stream.executions.values():
            execution.request_abort(reason)
        stream.apply(Abort())

    async def abort_and_drain(self, conversation_id: str, reason: str = "user-stop") -> bool:
        """Abort, then return only after the loops settled and their partials were persisted."""
        async with self.conversation_lock(conversation_id):
            aborted = self.abort(conversation_id, reason)
            await self.wait_settled(conversation_id)  # an abort never replaces the stream
            return aborted

    # --- execution loop ---------------------------------------------------------------------

    async def _run_execution(self, stream: LiveStream, execution: Execution) -> None:
        self.idle_watch.watch(execution)
        try:
            await run_execution(
                stream, execution, tracer=self._tracer, finish=self._finish, counted=self._count
            )
        finally:
            self.idle_watch.unwatch(execution)

    def _count(self) -> None:
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
        status = settle_execution(stream, execution, outcome, error)
        self.outcomes[status] = self.outcomes.get(status, 0) + 1
        fresh = self.registry.is_current(stream)
        all_done = all(e.terminal_status is not None for e in stream.executions.values())
        decision: TerminalDecision = "none"
        if all_done and fresh:
            decision = self.steers.after_terminal(stream, held=self.runtime_turns.holds)
        done = all_done and not stream.chaining
        result = terminal_result(
            stream, execution, status, reason=reason, is_conversation_done=done
        )
        if await run_terminal(stream, execution, result, limit=self.config.terminal_timeout):
            self.save_failures += 1
        if all_done and fresh:
            if stream.status == "done":
                self.status_book.mark_completed(stream.conversation_id, stream.turn_id, time.time())
            if decision == "chain":
                self._spawn(self.steers.start_next, stream.conversation_id)
            elif decision != "hold":
                self.registry.schedule_eviction(stream)

    # --- status -----------------------------------------------------------------------------

    def _on_status(self, stream: LiveStream, change: StatusChanged) -> None:
        if self.registry.is_current(stream):
            self.status_book.record(stream.conversation_id, change.status, stream.turn_id)

    def forget(self, conversation_id: str) -> None:
        """Drop every trace of a conversation (after it was deleted)."""
        self.registry.forget(conversation_id)
        self.status_book.forget(conversation_id)
        self.steers.drop(conversation_id)

    # --- runtime-driven turns (agent sessions) ----------------------------------------------

    def start_runtime_turn(self, request: SendInput) -> Started:
        """Start a successor turn that inherits the previous stream's subscribers."""
        return self.runtime_turns.start(request)

    async def terminate_held_stream(self, conversation_id: str, error: SerializedError) -> None:
        """End a held stream whose successor cannot launch: error its subscribers, then evict."""
        await self.runtime_turns.terminate(conversation_id, error)
