"""Terminal work of one execution: settle it, build its result, tell its listeners (§2.4.5).

``settle_execution`` records how the execution ended (status, error, final message) and feeds
the status reducer; ``terminal_result`` builds what the listeners receive; ``run_terminal`` runs
the dispatch shielded and bounded by ``terminal_timeout``, tracks the stream's in-flight terminal
work (``terminal_idle``) and sets the execution's ``settled`` whatever happens.

Dispatch order
Order: persistence-phase listeners, then unphased ones, then cleanup-phase ones, each awaited.
Dead listeners are removed, throws are isolated and logged with the listener id, and a
``TerminalPersistenceError`` from a persistence-phase listener (the final save failed) turns
the terminal the unphased (notification) listeners receive into an ``error`` saying the answer
could not be saved: subscribers always hear an end. ``run_terminal`` shields and bounds it; a
dispatch cut off at the bound inside one listener's callback goes on past that listener, each
later one bounded on its own (a persistence listener cut off counts as a failed save).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Final, Literal

import anyio

from drupe.errors import TerminalPersistenceError
from drupe.streaming.lazy_event import LazyEvent
from drupe.streaming.listeners.base import Listener, SerializedError, TerminalResult
from drupe.streaming.live import Execution, LiveStream
from drupe.streaming.status import ExecutionTerminal

__all__ = [
    "SAVE_FAILED",
    "Dispatch",
    "TerminalStatus",
    "deliver_terminal",
    "dispatch_terminal",
    "notify_listeners",
    "run_terminal",
    "settle_execution",
    "terminal_result",
]

TerminalStatus = Literal["success", "paused", "error"]
_EXECUTION_STATUS = {"done": "done", "paused": "aborted", "error": "error"}
_TERMINAL_STATUS: dict[str, TerminalStatus] = {
    "done": "success",
    "paused": "paused",
    "error": "error",
}

log = logging.getLogger(__name__)


def settle_execution(
    stream: LiveStream,
    execution: Execution,
    outcome: Literal["done", "paused", "error"],
    error: SerializedError | None,
) -> TerminalStatus:
    """Record how ``execution`` ended and feed the status reducer; returns its terminal status."""
    execution.completed_at = time.time()
    if execution.status == "streaming":
        execution.status = _EXECUTION_STATUS[outcome]
    status = _TERMINAL_STATUS[outcome]
    execution.terminal_status = status
    execution.error = error
    has_content = execution.chunk_count > 0 or execution.seed_message is not None
    execution.final_message = execution.snapshot() if has_content else None
    stream.publish_terminal(execution, status, error)
    stream.apply(ExecutionTerminal(execution.execution_id, outcome))
    return status


def terminal_result(
    stream: LiveStream,
    execution: Execution,
    status: TerminalStatus,
    *,
    reason: str | None,
    is_conversation_done: bool,
) -> TerminalResult:
    """What the listeners of a settled execution receive."""
    return TerminalResult(
        status=status,
        conversation_id=stream.conversation_id,
        turn_id=stream.turn_id,
        execution_id=execution.execution_id,
        model_id=execution.model_id,
        attempt_id=execution.attempt_id,
        anchor_message_id=execution.anchor_message_id,
        final_message=execution.final_message,
        is_conversation_done=is_conversation_done,
        error=execution.error,
        reason=reason,
        timings={
            "startedAt": execution.started_at * 1000,
            "firstChunkAt": (execution.first_chunk_at or 0) * 1000,
            "completedAt": (execution.completed_at or 0) * 1000,
        },
    )


async def run_terminal(
    stream: LiveStream, execution: Execution, result: TerminalResult, *, limit: float
) -> bool:
    """Dispatch ``result`` shielded and bounded; ``execution.settled`` is set afterwards.

    Records the terminal the subscribers received in ``execution.notified`` (a resume during
    the grace period ends with it). Returns whether the final save failed; the execution then
    keeps the error in ``save_error``. A dispatch cut off at ``limit`` (a listener's callback
    that hangs) is logged, and every listener after the stuck one still gets its terminal
    (``_finish_cut_off``; a stuck persistence listener counts as a failed save).
    """
    stream.terminal_inflight += 1
    if stream.terminal_inflight == 1:
        stream.terminal_idle = LazyEvent()
    try:
        progress = Dispatch(result)
        with anyio.move_on_after(limit, shield=True) as bound:
            await dispatch_terminal(stream, result, progress)
        if bound.cancelled_caught:
            log.error(
                "terminal work of %r (execution %r) exceeded %.0f s; listener %r cut off",
                stream.conversation_id,
                execution.execution_id,
                limit,
                progress.current and progress.current.listener_id,
            )
            await _finish_cut_off(stream, result, progress)
        notified = execution.notified = progress.notified
        save_failed = notified is not result
        if save_failed:
            execution.save_error = notified.error
    finally:
        stream.terminal_inflight -= 1
        if stream.terminal_inflight == 0:
            stream.terminal_idle.set()
        execution.settled.set()
    return save_failed


def deliver_terminal(listener: Listener, result: TerminalResult) -> Awaitable[None]:
    """Call the terminal callback of ``listener`` that matches ``result.status``."""
    return _handler(listener, result)(result)


def _handler(
    listener: Listener, result: TerminalResult
) -> Callable[[TerminalResult], Awaitable[None]]:
    if result.status == "success":
        return listener.on_done
    if result.status == "paused":
        return listener.on_paused
    return listener.on_error


SAVE_FAILED: SerializedError = {
    "name": "TerminalPersistenceError",
    "message": "the answer could not be saved",
}
"""The error subscribers receive when the final save of their answer failed."""


@dataclass(slots=True)
class Dispatch:
    """How far a terminal dispatch got: what the notification listeners receive, the
    listeners done, and the one being called (``run_terminal`` finishes a cut-off one)."""

    notified: TerminalResult
    done: set[str] = field(default_factory=set)
    current: Listener | None = None


async def dispatch_terminal(
    stream: LiveStream, result: TerminalResult, progress: Dispatch | None = None
) -> TerminalResult:
    """Run every listener's terminal callback for ``result``, in phase order.

    When a persistence-phase listener raises ``TerminalPersistenceError`` (the final save
    failed), the notification listeners get an ``error`` terminal saying the answer could not
    be saved instead of ``result``, so every subscriber still hears the end. Returns the
    terminal the notification listeners received (``progress`` records it as it goes).
    """
    progress = Dispatch(result) if progress is None else progress
    for listener in stream.ordered_listeners():
        if not listener.is_alive():
            stream.remove_listener(listener.listener_id)
            continue
        progress.current = listener
        await _call(listener, result, progress)
        progress.done.add(listener.listener_id)
    progress.current = None
    return progress.notified


async def _call(listener: Listener, result: TerminalResult, progress: Dispatch) -> None:
    target = progress.notified if listener.terminal_phase is None else result
    try:
        await _handler(listener, target)(target)
    except TerminalPersistenceError:
        log.exception("terminal persistence failed for %r", listener.listener_id)
        if listener.terminal_phase == "persistence" and progress.notified is result:
            progress.notified = _save_failed(result)
    except Exception:  # isolation boundary: terminal listener dispatch
        log.exception("listener %r raised in its terminal callback", listener.listener_id)


def _save_failed(result: TerminalResult) -> TerminalResult:
    return replace(result, status="error", error=dict(SAVE_FAILED))


_AFTER_CUT_OFF: Final = 1.0
"""Seconds each listener after a cut-off one gets for its terminal callback."""


async def _finish_cut_off(stream: LiveStream, result: TerminalResult, progress: Dispatch) -> None:
    """The dispatch was cut off at its bound inside one listener's callback: every listener
    after it still gets its terminal (each bounded by ``_AFTER_CUT_OFF``), so subscribers hear
    an end. A persistence listener cut off did not finish the save: the notification listeners
    hear that it failed."""
    stuck = progress.current
    if stuck is not None and stuck.terminal_phase == "persistence" and progress.notified is result:
        progress.notified = _save_failed(result)
    for listener in stream.ordered_listeners():
        if listener is stuck or listener.listener_id in progress.done or not listener.is_alive():
            continue
        with anyio.move_on_after(_AFTER_CUT_OFF, shield=True) as bound:
            await _call(listener, result, progress)
        if bound.cancelled_caught:
            log.error("listener %r cut off after the terminal bound", listener.listener_id)


async def notify_listeners(
    listeners: Sequence[Listener], result: TerminalResult, *, limit: float
) -> None:
    """Deliver ``result`` to listeners that have no stream any more (a failed launch)."""
    for listener in listeners:
        try:
            with anyio.move_on_after(limit, shield=True):
                await _handler(listener, result)(result)
        except Exception:  # isolation boundary: terminal listener dispatch
            log.exception("listener %r raised in its terminal callback", listener.listener_id)
