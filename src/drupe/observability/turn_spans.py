"""The child spans of one ``ai.turn`` span, read off the execution's chunk stream.

Driver-independent: the in-process loop, the Claude Code driver and any other source produce
the same UI chunks, so the spans are made from them as the execution loop fans them out:

* one ``chat <model>`` span per model request (``start-step`` .. ``finish-step``), with the
  OpenTelemetry ``gen_ai.*`` semantic-convention attributes: ``gen_ai.operation.name = chat``,
  ``gen_ai.request.model``, ``gen_ai.usage.input_tokens`` / ``output_tokens`` (the step's share
  of the cumulative ``message-metadata`` usage that follows it), and
  ``gen_ai.response.finish_reasons`` (from the turn's ``finish`` chunk, on its last step). A step
  span ends when the next chunk that is not its usage arrives, so its usage lands on it;
* one ``execute_tool <name>`` span per tool call, from ``tool-input-available`` to its output
  (``tool-output-available`` OK; ``tool-output-error`` / ``-denied`` ERROR), with
  ``gen_ai.operation.name = execute_tool``, ``gen_ai.tool.name`` and ``gen_ai.tool.call.id``.

Both are children of the ``ai.turn`` span. ``close`` ends what is still open with the turn's
outcome. While open, a step or tool span is a plain record (name, start time, attributes) that
becomes an OpenTelemetry span, started at that time, when it ends (issue 11 §2: an open SDK span
holds ~3 KB, two ``BoundedList`` deques among them, for the whole model request). So span
processors see it start and end at once; nothing parents a span under it (spans made while a
turn runs nest under ``ai.turn``, the current span). ``ai.turn`` itself is a record too while
the execution runs (``turn_record``): ``turn`` is then a ``NonRecordingSpan`` of its reserved
context and ``recording`` says whether it will be recorded. Nothing is traced under a turn span
that does not record. Attributes never carry message content. ``container_context(conversation_id)``
is the remote parent every ``ai.turn`` of a conversation hangs under: its trace id is the
conversation's (``trace_id_for``), stored on the conversation's row.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, StatusCode, TraceFlags

__all__ = ["TurnSpans", "container_context", "trace_id_for", "traceparent_for"]

log = logging.getLogger(__name__)


def _digest(conversation_id: str) -> str:
    return hashlib.sha256(conversation_id.encode()).hexdigest()


def trace_id_for(conversation_id: str) -> str:
    """The conversation's trace id (32 hex digits), a pure function of its id."""
    return _digest(conversation_id)[:32]


def traceparent_for(conversation_id: str) -> str:
    """The W3C ``traceparent`` of the conversation's container span (for agent runtimes)."""
    digest = _digest(conversation_id)
    span_id = digest[32:48] if int(digest[32:48], 16) else "0000000000000001"
    return f"00-{digest[:32]}-{span_id}-01"


def container_context(conversation_id: str) -> otel_context.Context:
    """A context whose (remote, sampled) parent span puts spans in the conversation's trace."""
    digest = _digest(conversation_id)
    parent = SpanContext(
        trace_id=int(digest[:32], 16),
        span_id=int(digest[32:48], 16) or 1,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(NonRecordingSpan(parent))


class _Open:
    """A child span not yet handed to OpenTelemetry: its name, start time and attributes."""

    __slots__ = ("attributes", "name", "start")

    def __init__(self, name: str, attributes: dict[str, Any]) -> None:
        self.name = name
        self.start = time.time_ns()
        self.attributes = attributes


class TurnSpans:
    """Opens and ends the step and tool spans of one execution."""

    def __init__(
        self,
        tracer: trace.Tracer,
        turn: trace.Span,
        *,
        model_id: str,
        conversation_id: str,
        recording: bool | None = None,
    ) -> None:
        self._tracer = tracer
        self._context = trace.set_span_in_context(turn)
        self._recording = turn.is_recording() if recording is None else recording
        self._model_id = model_id
        self._conversation_id = conversation_id
        self._step: _Open | None = None
        self._step_open = False
        self._tools: dict[str, _Open] = {}
        self._usage_seen = (0, 0)
        self.steps = 0

    def _start(self, name: str, attributes: dict[str, Any]) -> _Open:
        attributes["drupe.conversation_id"] = self._conversation_id
        return _Open(name, attributes)

    def _end(self, span: _Open, code: StatusCode, description: str | None = None) -> None:
        """Hand ``span`` to OpenTelemetry as a whole: started at its start, ended now."""
        ended = self._tracer.start_span(
            span.name,
            context=self._context,
            kind=trace.SpanKind.CLIENT,
            attributes=span.attributes,
            start_time=span.start,
        )
        ended.set_status(code, description)
        ended.end()

    def observe(self, chunk: Any) -> None:
        """Take one fanned-out chunk. Never raises (a span bug must not fail a turn)."""
        if not self._recording:
            return
        try:
            self._observe(chunk)
        except Exception:  # isolation boundary: tracing never breaks the execution loop
            log.debug("turn spans: chunk not traced", exc_info=True)

    def _observe(self, chunk: Any) -> None:
        kind = chunk.get("type")
        if kind == "message-metadata":
            self._usage(chunk.get("messageMetadata"))
            return
        if kind == "finish":
            reason = chunk.get("finishReason")
            if isinstance(reason, str) and self._step is not None:
                self._step.attributes["gen_ai.response.finish_reasons"] = (reason,)
            self._usage(chunk.get("messageMetadata"))
            return
        if self._step is not None and not self._step_open:
            self._end_step()  # its usage (if any) came already
        if kind == "start-step":
            self.steps += 1
            self._step = self._start(
                f"chat {self._model_id}",
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": self._model_id,
                    "drupe.step": self.steps,
                },
            )
            self._step_open = True
        elif kind == "finish-step":
            self._step_open = False
        elif kind == "tool-input-available":
            call_id, name = chunk.get("toolCallId"), chunk.get("toolName")
            if isinstance(call_id, str) and isinstance(name, str) and call_id not in self._tools:
                self._tools[call_id] = self._start(
                    f"execute_tool {name}",
                    {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": name,
                        "gen_ai.tool.call.id": call_id,
                    },
                )
        elif kind in ("tool-output-available", "tool-output-error", "tool-output-denied"):
            if chunk.get("preliminary") is True:
                return  # a running call's progress: its span goes on
            span = self._tools.pop(str(chunk.get("toolCallId")), None)
            if span is not None:
                if kind == "tool-output-available":
                    self._end(span, StatusCode.OK)
                else:
                    self._end(span, StatusCode.ERROR, str(chunk.get("errorText") or kind))

    def _usage(self, metadata: Any) -> None:
        usage = metadata.get("usage") if isinstance(metadata, dict) else None
        target = self._step  # an ended step takes no more attributes
        if not isinstance(usage, dict) or target is None:
            return
        total_in = int(usage.get("inputTokens") or 0)
        total_out = int(usage.get("outputTokens") or 0)
        seen_in, seen_out = self._usage_seen
        target.attributes["gen_ai.usage.input_tokens"] = max(0, total_in - seen_in)
        target.attributes["gen_ai.usage.output_tokens"] = max(0, total_out - seen_out)
        self._usage_seen = (total_in, total_out)

    def _end_step(self) -> None:
        step, self._step = self._step, None
        if step is not None:
            self._end(step, StatusCode.OK)

    def close(self, ok: bool, description: str | None = None) -> None:
        """End every open span: OK when the turn succeeded, else ERROR ``description``."""
        open_step = self._step_open
        step, self._step = self._step, None
        if step is not None:
            if open_step and not ok:
                self._end(step, StatusCode.ERROR, description or "error")
            else:
                self._end(step, StatusCode.OK)
        for span in self._tools.values():
            self._end(span, StatusCode.ERROR, description or "the turn ended first")
        self._tools.clear()
