"""The execution loop: read one model's chunk source once, fan it out, classify the end.

``run_execution`` is what the stream manager runs as one task per execution. Contract:

* the source is opened in the task, read once, and closed (shielded, bounded) when the loop
  ends, so its ``finally`` runs;
* the idle watchdog is the manager's ``IdleWatch`` (one task for every execution, the approval
  bound while an approval is pending): it stops the execution with reason ``idle-timeout``,
  which ends ``paused``; the loop itself reads no clock;
* classification, first match: the source raised -> ``error`` (serialized); aborted -> ``paused``;
  an ``error`` chunk was seen -> ``error`` named ``StreamError``; else ``done``;
* a user abort cancels the execution's own scope, which absorbs it; external cancellation
  (shutdown) still runs the terminal work (shielded) and then propagates;
* with a tracer, one ``ai.turn`` span covers the execution and carries its outcome; it lives in
  the conversation's trace (``container_context``) and has a child span per model request and
  per tool call (``TurnSpans``, fed every chunk the loop fans out). While the execution runs it
  is a record (``TurnRecord``: its reserved span context is the current span); the SDK span is
  made, at its recorded start, when it ends. The spans END before the terminal work runs, so a
  terminal listener (the trace flush) sees them all.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Literal

import anyio
from opentelemetry import trace

from drupe.chunks.accumulate import Accumulator
from drupe.chunks.types import Chunk
from drupe.ids import next_attempt_id
from drupe.observability.tracing import TURN_SPAN
from drupe.observability.turn_record import TurnRecord, open_turn
from drupe.observability.turn_spans import TurnSpans, container_context
from drupe.streaming.config import StreamConfig
from drupe.streaming.contracts import ExecutionSpec
from drupe.streaming.listeners.base import SerializedError, serialize_error
from drupe.streaming.live import Execution, LiveStream
from drupe.streaming.ring import ReplayRing

__all__ = ["Outcome", "new_execution", "run_execution"]

log = logging.getLogger(__name__)

Outcome = Literal["done", "paused", "error"]
Finish = Callable[
    [LiveStream, Execution, Outcome, SerializedError | None, str | None], Awaitable[None]
]


def new_execution(spec: ExecutionSpec, config: StreamConfig) -> Execution:
    """A fresh execution of ``spec`` (new attempt id, empty ring, accumulator on its seed)."""
    return Execution(
        execution_id=spec.model_id,
        model_id=spec.model_id,
        attempt_id=next_attempt_id(),
        anchor_message_id=spec.anchor_message_id,
        source=spec.source,
        ring=ReplayRing(
            max_entries=config.max_buffer_chunks, max_delta_bytes=config.max_delta_bytes
        ),
        accumulator=Accumulator(seed=spec.seed_message),
        seed_message=spec.seed_message,
    )


async def run_execution(
    stream: LiveStream,
    execution: Execution,
    *,
    tracer: trace.Tracer | None,
    finish: Finish,
    counted: Callable[[], None],
) -> None:
    """Run one execution to its terminal; ``finish`` performs the terminal work."""
    if tracer is None:
        await _run(stream, execution, None, finish, counted)
        return
    turn = open_turn(
        tracer,
        TURN_SPAN,
        context=container_context(stream.conversation_id),
        attributes={
            "drupe.conversation_id": stream.conversation_id,
            "drupe.turn_id": stream.turn_id,
            "drupe.model_id": execution.model_id,
            "drupe.attempt_id": execution.attempt_id,
            "drupe.message_id": execution.anchor_message_id or "",
        },
    )
    spans = TurnSpans(
        tracer,
        turn.span,
        model_id=execution.model_id,
        conversation_id=stream.conversation_id,
        recording=turn.recording,
    )
    with trace.use_span(turn.span, end_on_exit=False):
        await _run(stream, execution, (turn, spans), finish, counted)


def _end_spans(
    traced: tuple[TurnRecord, TurnSpans] | None, ok: bool, description: str | None
) -> None:
    if traced is None:
        return
    turn, spans = traced
    spans.close(ok, description)
    turn.end(ok, description)


async def _run(
    stream: LiveStream,
    execution: Execution,
    traced: tuple[TurnRecord, TurnSpans] | None,
    finish: Finish,
    counted: Callable[[], None],
) -> None:
    observe = traced[1].observe if traced is not None else None
    try:
        outcome, error, reason = await _pump(stream, execution, counted, observe)
    except BaseException:
        # External cancellation (shutdown): settle as paused, then let it propagate.
        execution.status = "aborted"
        execution.abort_reason = execution.abort_reason or "app-shutdown"
        _end_spans(traced, False, f"aborted: {execution.abort_reason}")
        with anyio.CancelScope(shield=True):
            await finish(stream, execution, "paused", None, execution.abort_reason)
        raise
    if traced is not None:
        traced[0].set_attribute("drupe.chunks", execution.chunk_count)
        if outcome == "done":
            _end_spans(traced, True, None)
        elif outcome == "paused":
            _end_spans(traced, False, f"aborted: {reason}")
        else:
            _end_spans(traced, False, (error or {}).get("message", "error"))
    await finish(stream, execution, outcome, error, reason)


async def _pump(
    stream: LiveStream,
    execution: Execution,
    counted: Callable[[], None],
    observe: Callable[[Chunk], None] | None = None,
) -> tuple[Outcome, SerializedError | None, str | None]:
    publish = stream.publish
    # One cancel scope serves every stop: a stop (user, shutdown, the idle watch) marks the
    # execution aborted with its reason, then cancels the scope. The loop reads no clock.
    with anyio.CancelScope() as scope:
        execution.scope = scope
        if execution.status != "streaming":
            scope.cancel()
        try:
            source = execution.source()
            try:
                async for chunk in source:
                    if publish(execution, chunk):
                        counted()
                        if observe is not None:
                            observe(chunk)
            finally:
                await _close_source(source)
        except Exception as err:  # isolation boundary: the loop raised -> error outcome
            if execution.status == "aborted":
                return "paused", None, execution.abort_reason
            return "error", serialize_error(_unwrap(err)), None
    if execution.status == "aborted":
        return "paused", None, execution.abort_reason
    if execution.stream_error_text is not None:
        return "error", {"name": "StreamError", "message": execution.stream_error_text}, None
    return "done", None, None


async def _close_source(source: object) -> None:
    """Close an async generator source, shielded and bounded (its ``finally`` runs now)."""
    aclose = getattr(source, "aclose", None)
    if aclose is None:
        return
    with anyio.move_on_after(5, shield=True):
        try:
            await aclose()
        except Exception:  # isolation boundary: a source failing while closing
            log.debug("chunk source raised while closing", exc_info=True)


def _unwrap(err: BaseException) -> BaseException:
    while isinstance(err, BaseExceptionGroup) and len(err.exceptions) == 1:
        err = err.exceptions[0]
    return err
