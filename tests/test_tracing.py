"""One ``ai.turn`` span per execution, with identities and the outcome as its status."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from drupe.observability.tracing import TURN_SPAN, configure_tracing
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
