"""One ``ai.turn`` span per execution, with identities and the outcome as its status."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from drupe.chunks.types import Chunk
from drupe.observability.tracing import TURN_SPAN, configure_tracing
from drupe.observability.turn_spans import container_context, trace_id_for
from drupe.streaming.manager import ExecutionSpec, SendInput, StreamManager
from drupe.testing.recording import RecordingListener
from tests.streaming.sources import Source, text_chunks


async def test_each_execution_gets_an_ai_turn_span_with_its_outcome() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    async with StreamManager(tracer=tracer) as manager:
        rec = RecordingListener("tab")
        manager.send(
            SendInput(
                conversation_id="c1",
                executions=[
                    ExecutionSpec(
                        model_id="a", source=Source(text_chunks("m", ["x"])), anchor_message_id="p1"
                    ),
                    ExecutionSpec(model_id="b", source=Source([], fail_at=0)),
                ],
                listeners=[rec],
            )
        )
        await rec.wait_done()
    turns = [s for s in exporter.get_finished_spans() if s.name == TURN_SPAN]
    spans = {s.attributes["drupe.model_id"]: s for s in turns}  # type: ignore[index]
    assert set(spans) == {"a", "b"}
    assert spans["a"].status.status_code is StatusCode.OK
    assert spans["a"].attributes["drupe.conversation_id"] == "c1"  # type: ignore[index]
    assert spans["a"].attributes["drupe.message_id"] == "p1"  # type: ignore[index]
    assert spans["b"].status.status_code is StatusCode.ERROR


def test_tracing_is_off_without_an_endpoint() -> None:
    assert configure_tracing({}) is None


async def test_a_live_ai_turn_is_no_sdk_span_until_it_ends_and_parents_its_children() -> None:
    class Started(SpanProcessor):
        def __init__(self) -> None:
            self.names: list[str] = []

        def on_start(self, span: Any, parent_context: Any = None) -> None:
            self.names.append(span.name)

    exporter, started = InMemorySpanExporter(), Started()
    provider = TracerProvider()
    provider.add_span_processor(started)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    gate, inside = anyio.Event(), anyio.Event()
    seen: list[str] = []

    async def source() -> AsyncIterator[Chunk]:
        yield {"type": "start"}
        yield {"type": "start-step"}
        # Work done under the turn (the agent loop's, pydantic-ai's) nests under ai.turn.
        with tracer.start_as_current_span("inner"):
            seen.extend(started.names)
        inside.set()
        await gate.wait()
        yield {"type": "finish-step"}
        yield {"type": "finish", "finishReason": "stop"}

    before = time.time_ns()
    async with StreamManager(tracer=tracer) as manager:
        rec = RecordingListener("tab")
        manager.send(
            SendInput(
                conversation_id="c1",
                executions=[ExecutionSpec(model_id="m", source=source)],
                listeners=[rec],
            )
        )
        await inside.wait()
        assert seen == ["inner"], "a live turn holds no SDK span (nor its open step)"
        gate.set()
        await rec.wait_done()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    turn, step, inner = spans[TURN_SPAN], spans["chat m"], spans["inner"]
    turn_id = turn.context.span_id if turn.context is not None else None
    assert turn.context is not None and turn.parent is not None
    assert turn.context.trace_id == int(trace_id_for("c1"), 16)
    assert turn.parent.span_id == container_context_parent("c1")
    assert step.parent is not None and step.parent.span_id == turn_id
    assert inner.parent is not None and inner.parent.span_id == turn_id
    assert turn.start_time is not None and before <= turn.start_time <= (step.start_time or 0)
    assert turn.end_time is not None and turn.end_time >= (step.end_time or 0)
    assert turn.attributes is not None and turn.attributes["drupe.chunks"] == 4
    assert turn.status.status_code is StatusCode.OK
    assert started.names[-1] == TURN_SPAN, "ai.turn starts (and ends) when the turn ends"


async def test_a_tracer_that_is_not_the_sdks_still_gets_a_turn_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    async with StreamManager(tracer=_Delegating(provider.get_tracer("test"))) as manager:
        rec = RecordingListener("tab")
        manager.send(
            SendInput(
                conversation_id="c2",
                executions=[ExecutionSpec(model_id="a", source=Source(text_chunks("m", ["x"])))],
                listeners=[rec],
            )
        )
        await rec.wait_done()
    (turn,) = [s for s in exporter.get_finished_spans() if s.name == TURN_SPAN]
    assert turn.status.status_code is StatusCode.OK


class _Delegating(trace.Tracer):
    """A tracer that is not the SDK's (no ``id_generator``): the turn's span is made at open."""

    def __init__(self, inner: trace.Tracer) -> None:
        self.inner = inner

    def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
        return self.inner.start_span(*args, **kwargs)

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.start_as_current_span(*args, **kwargs)


def container_context_parent(conversation_id: str) -> int:
    parent = trace.get_current_span(container_context(conversation_id)).get_span_context()
    return parent.span_id
