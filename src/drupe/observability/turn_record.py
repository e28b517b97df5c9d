"""The ``ai.turn`` span of a live execution, held as a record until the execution ends.

``open_turn(tracer, name, context=, attributes=)`` returns a ``TurnRecord``: the span's name,
start time, attributes and the ``SpanContext`` it will have (trace id, span id, sampling
flags, decided at open exactly as the SDK tracer would). While the execution runs, the record's
``span`` (a ``NonRecordingSpan`` of that context) is the current span, so spans made under the
turn (the step and tool spans, the agent loop's, pydantic-ai's) get it as their parent.
``end(ok, description)`` creates the real SDK span, started at the recorded time with the
reserved span id, sets its status and ends it: span processors see ``on_start`` and ``on_end``
of ``ai.turn`` at once, when the turn ends (issue 24 §2: an open SDK span holds ~3 KB, two
``BoundedList`` deques, a lock and ``BoundedAttributes``, for the whole answer).

How the id is reserved: the tracer's ``id_generator`` is wrapped once (``PresetSpanIds``,
delegating to the original) so that, inside ``end``, it hands out the reserved ids instead of
new ones (a context variable, so another thread or task using the tracer meanwhile is not
affected). A tracer that is not the OpenTelemetry SDK's (no ``id_generator``, or a disabled
one) gets a real span at open, as before: ``TurnRecord`` then wraps that span.

Must never: raise out of ``end`` (a tracing bug must not fail a turn), or give a child a parent
id that the ended ``ai.turn`` does not have.
"""

from __future__ import annotations

import logging
import time
from contextvars import ContextVar
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, StatusCode, TraceFlags

__all__ = ["PresetSpanIds", "TurnRecord", "open_turn"]

log = logging.getLogger(__name__)

_PRESET: ContextVar[tuple[int, int] | None] = ContextVar("drupe_preset_ids", default=None)


class PresetSpanIds(IdGenerator):
    """The wrapped generator's ids, except inside ``TurnRecord.end``: the reserved ones."""

    def __init__(self, inner: IdGenerator) -> None:
        self.inner = inner

    def generate_span_id(self) -> int:
        preset = _PRESET.get()
        return preset[1] if preset is not None else self.inner.generate_span_id()

    def generate_trace_id(self) -> int:
        preset = _PRESET.get()
        return preset[0] if preset is not None else self.inner.generate_trace_id()

    def is_trace_id_random(self) -> bool:
        return self.inner.is_trace_id_random()


def _preset_ids(tracer: trace.Tracer) -> PresetSpanIds | None:
    """The tracer's ``PresetSpanIds`` (installed on first use); None: not an SDK tracer."""
    ids = getattr(tracer, "id_generator", None)
    if isinstance(ids, PresetSpanIds):
        return ids
    if not isinstance(ids, IdGenerator) or not hasattr(tracer, "sampler"):
        return None
    enabled = getattr(tracer, "_is_enabled", None)
    if enabled is not None and not enabled():
        return None
    wrapped = PresetSpanIds(ids)
    tracer.id_generator = wrapped  # type: ignore[attr-defined]
    return wrapped


class TurnRecord:
    """One ``ai.turn``: a record while open (``span`` is its context), a real span once ended."""

    __slots__ = ("_parent", "_real", "_tracer", "attributes", "name", "recording", "span", "start")

    def __init__(
        self,
        tracer: trace.Tracer,
        name: str,
        parent: Context,
        attributes: dict[str, Any],
        span: trace.Span,
        real: bool,
        recording: bool,
    ) -> None:
        self._tracer = tracer
        self.name = name
        self._parent = parent
        self.attributes = attributes
        self.start = time.time_ns()
        self.span = span
        """The current span while the turn runs: its children's parent."""
        self._real = real
        self.recording = recording
        """Whether the turn will be recorded (its children are made only then)."""

    def set_attribute(self, key: str, value: Any) -> None:
        if self._real:
            self.span.set_attribute(key, value)
        else:
            self.attributes[key] = value

    def end(self, ok: bool, description: str | None = None) -> None:
        """Hand the turn to OpenTelemetry (started at its start, with its reserved ids), ended
        now with status OK, or ERROR ``description``. Never raises."""
        try:
            span = self.span if self._real else self._materialize()
            if ok:
                span.set_status(StatusCode.OK)
            else:
                span.set_status(StatusCode.ERROR, description)
            span.end()
        except Exception:  # isolation boundary: tracing never fails a turn
            log.debug("ai.turn span not ended", exc_info=True)

    def _materialize(self) -> trace.Span:
        reserved = self.span.get_span_context()
        token = _PRESET.set((reserved.trace_id, reserved.span_id))
        try:
            span = self._tracer.start_span(
                self.name, context=self._parent, attributes=self.attributes, start_time=self.start
            )
        finally:
            _PRESET.reset(token)
        if span.get_span_context().span_id != reserved.span_id:
            log.debug("ai.turn span: the tracer did not take the reserved span id")
        return span


def open_turn(
    tracer: trace.Tracer, name: str, *, context: Context, attributes: dict[str, Any]
) -> TurnRecord:
    """Open an ``ai.turn`` under ``context``: a record when ``tracer`` is the SDK's."""
    ids = _preset_ids(tracer)
    if ids is None:
        real = tracer.start_span(name, context=context, attributes=attributes)
        return TurnRecord(tracer, name, context, attributes, real, True, real.is_recording())
    parent = trace.get_current_span(context).get_span_context()
    trace_id = parent.trace_id if parent.is_valid else ids.generate_trace_id()
    sampler = tracer.sampler  # type: ignore[attr-defined]
    decision = sampler.should_sample(
        context, trace_id, name, trace.SpanKind.INTERNAL, attributes, ()
    )
    flags = TraceFlags.SAMPLED if decision.decision.is_sampled() else TraceFlags.DEFAULT
    random = parent.trace_flags.random_trace_id if parent.is_valid else ids.is_trace_id_random()
    if random:
        flags |= TraceFlags.RANDOM_TRACE_ID
    reserved = SpanContext(
        trace_id,
        ids.generate_span_id(),
        is_remote=False,
        trace_flags=TraceFlags(flags),
        trace_state=decision.trace_state,
    )
    return TurnRecord(
        tracer,
        name,
        context,
        attributes,
        NonRecordingSpan(reserved),
        False,
        decision.decision.is_recording(),
    )
