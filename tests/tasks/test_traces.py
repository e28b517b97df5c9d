"""Conversation traces: ``ai.turn`` with a child span per model request and per tool call, in the
conversation's trace; the flush at terminal into the local store, with its retention bound."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from drupe.app import Runtime
from drupe.observability.trace_store import TraceRecorder, TraceStore
from drupe.observability.turn_spans import TurnSpans, trace_id_for
from drupe.streaming.listeners.trace_flush import TraceFlushListener
from drupe.streaming.manager import ExecutionSpec, SendInput, StreamManager
from drupe.testing.recording import RecordingListener
from tests.gateway.conftest import app, client, runtime, settings
from tests.gateway.sse import chat_body
from tests.streaming.sources import Source

__all__ = ["app", "client", "runtime", "settings"]

TOOL_TURN: list[dict[str, Any]] = [
    {"type": "start", "messageId": "m1"},
    {"type": "start-step"},
    {"type": "tool-input-start", "toolCallId": "c1", "toolName": "get_weather"},
    {"type": "tool-input-available", "toolCallId": "c1", "toolName": "get_weather", "input": {}},
    {"type": "finish-step"},
    {
        "type": "message-metadata",
        "messageMetadata": {"usage": {"inputTokens": 10, "outputTokens": 4}},
    },
    {"type": "tool-output-available", "toolCallId": "c1", "output": {"temp": 21}},
    {"type": "start-step"},
    {"type": "text-start", "id": "t"},
    {"type": "text-delta", "id": "t", "delta": "21 degrees"},
    {"type": "text-end", "id": "t"},
    {"type": "finish-step"},
    {
        "type": "message-metadata",
        "messageMetadata": {"usage": {"inputTokens": 25, "outputTokens": 9}},
    },
    {"type": "finish", "finishReason": "stop"},
]


class Failing(InMemorySpanExporter):
    def export(self, spans: Any) -> SpanExportResult:
        return SpanExportResult.FAILURE


async def _run(manager: StreamManager, conversation_id: str, source: Source) -> RecordingListener:
    rec = RecordingListener("tab")
    manager.send(
        SendInput(
            conversation_id=conversation_id,
            executions=[ExecutionSpec(model_id="openai:gpt-x", source=source)],
            listeners=[rec],
        )
    )
    await rec.wait_done()
    return rec


async def test_a_tool_turn_has_step_and_tool_spans_under_its_turn(tmp_path: Path) -> None:
    memory = InMemorySpanExporter()
    finished = InMemorySpanExporter()
    async with (
        TraceRecorder(TraceStore(tmp_path / "traces"), memory) as recorder,
        StreamManager(
            tracer=recorder.tracer,
            stream_listeners=[lambda cid: TraceFlushListener(cid, recorder.schedule)],
        ) as manager,
    ):
        recorder.provider.add_span_processor(SimpleSpanProcessor(finished))
        await _run(manager, "c-tool", Source(TOOL_TURN))
        await manager.wait_settled("c-tool")
        await recorder.idle()
    spans = {
        s.name + ("#2" if s.attributes.get("drupe.step") == 2 else ""): s
        for s in finished.get_finished_spans()
    }  # type: ignore[union-attr]
    assert set(spans) == {
        "ai.turn",
        "chat openai:gpt-x",
        "chat openai:gpt-x#2",
        "execute_tool get_weather",
    }
    turn = spans["ai.turn"]
    assert turn.context is not None and turn.parent is not None
    assert f"{turn.context.trace_id:032x}" == trace_id_for("c-tool")
    assert turn.parent.is_remote and turn.status.status_code is StatusCode.OK
    for name in ("chat openai:gpt-x", "chat openai:gpt-x#2", "execute_tool get_weather"):
        child = spans[name]
        assert child.parent is not None and child.parent.span_id == turn.context.span_id
        assert child.context is not None and child.context.trace_id == turn.context.trace_id
        assert child.status.status_code is StatusCode.OK
    first, second = spans["chat openai:gpt-x"], spans["chat openai:gpt-x#2"]
    assert first.attributes["gen_ai.operation.name"] == "chat"  # type: ignore[index]
    assert first.attributes["gen_ai.request.model"] == "openai:gpt-x"  # type: ignore[index]
    assert (
        first.attributes["gen_ai.usage.input_tokens"],
        first.attributes["gen_ai.usage.output_tokens"],
    ) == (10, 4)  # type: ignore[index]
    assert (
        second.attributes["gen_ai.usage.input_tokens"],
        second.attributes["gen_ai.usage.output_tokens"],
    ) == (15, 5)  # type: ignore[index]
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)  # type: ignore[index]
    assert "gen_ai.response.finish_reasons" not in first.attributes  # type: ignore[operator]
    tool = spans["execute_tool get_weather"]
    assert tool.attributes["gen_ai.tool.name"] == "get_weather"  # type: ignore[index]
    assert tool.attributes["gen_ai.tool.call.id"] == "c1"  # type: ignore[index]
    assert tool.start_time is not None and tool.end_time is not None
    assert first.end_time is not None and tool.start_time >= first.start_time  # type: ignore[operator]
    # The flush exported all four to the (OTLP) exporter and to the local store.
    assert len(memory.get_finished_spans()) == 4
    stored = recorder.store.read("c-tool") if recorder.store else []
    assert sorted(s["name"] for s in stored) == sorted(
        s.name for s in finished.get_finished_spans()
    )
    assert {s["traceId"] for s in stored} == {trace_id_for("c-tool")}


async def test_an_errored_turn_marks_its_turn_and_open_spans_error(tmp_path: Path) -> None:
    finished = InMemorySpanExporter()
    async with (
        TraceRecorder(TraceStore(tmp_path / "traces"), Failing()) as recorder,
        StreamManager(
            tracer=recorder.tracer,
            stream_listeners=[lambda cid: TraceFlushListener(cid, recorder.schedule)],
        ) as manager,
    ):
        recorder.provider.add_span_processor(SimpleSpanProcessor(finished))
        # Fails inside the tool call of the first step: the tool span is still open.
        rec = await _run(manager, "c-err", Source(TOOL_TURN, fail_at=5))
        await manager.wait_settled("c-err")
        await recorder.idle()
    assert rec.terminals[-1].status == "error"  # a failed flush (the exporter) changed nothing
    spans = {s.name: s for s in finished.get_finished_spans()}
    assert set(spans) == {"ai.turn", "chat openai:gpt-x", "execute_tool get_weather"}
    assert spans["ai.turn"].status.status_code is StatusCode.ERROR
    assert spans["execute_tool get_weather"].status.status_code is StatusCode.ERROR
    assert spans["chat openai:gpt-x"].status.status_code is StatusCode.OK  # it had finished
    assert len(TraceStore(tmp_path / "traces").read("c-err")) == 3  # the local store still got them


class _Started(SpanProcessor):
    """Records the name of every span the SDK starts."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.names.append(span.name)


def test_an_open_step_is_no_sdk_span_until_it_ends_and_keeps_its_start_time() -> None:
    provider = TracerProvider()
    started, finished = _Started(), InMemorySpanExporter()
    provider.add_span_processor(started)
    provider.add_span_processor(SimpleSpanProcessor(finished))
    tracer = provider.get_tracer("test")
    turn = tracer.start_span("ai.turn")
    spans = TurnSpans(tracer, turn, model_id="m", conversation_id="c")
    before = time.time_ns()
    spans.observe({"type": "start-step"})
    spans.observe({"type": "text-start", "id": "t"})
    spans.observe({"type": "text-delta", "id": "t", "delta": "hi"})
    assert started.names == ["ai.turn"], "a streaming model request holds no SDK span"
    spans.observe({"type": "finish-step"})
    spans.observe({"type": "message-metadata", "messageMetadata": {"usage": {"inputTokens": 3}}})
    spans.observe({"type": "finish", "finishReason": "stop"})
    spans.close(True)
    (step,) = finished.get_finished_spans()
    assert step.name == "chat m" and step.parent is not None
    assert step.parent.span_id == turn.get_span_context().span_id
    assert step.start_time is not None and before <= step.start_time <= time.time_ns()
    assert step.end_time is not None and step.end_time >= step.start_time
    assert step.attributes is not None
    assert step.attributes["gen_ai.usage.input_tokens"] == 3
    assert step.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert step.status.status_code is StatusCode.OK


def test_the_local_store_keeps_its_retention_bound(tmp_path: Path) -> None:
    store = TraceStore(tmp_path, max_files=3, max_age=timedelta(days=1), max_spans=5)
    span = {"name": "s", "start": 1}
    for index in range(5):
        store.append(f"c{index}", [span])  # each write prunes: the least recently written go
        stamp = time.time() - 100 + index
        os.utime(store.path_for(f"c{index}"), (stamp, stamp))
    assert [bool(store.read(f"c{i}")) for i in range(5)] == [False, False, True, True, True]
    store.append("c4", [{"name": f"x{i}", "start": 10 + i} for i in range(7)])
    assert [s["name"] for s in store.read("c4")] == ["x2", "x3", "x4", "x5", "x6"]
    old = time.time() - 2 * 86400
    os.utime(store.path_for("c2"), (old, old))
    assert store.prune() == 1
    assert store.read("c2") == [] and store.read("c3") != []


async def test_a_chat_turn_is_traced_into_the_data_dir_and_served(
    runtime: Runtime, client: httpx.AsyncClient
) -> None:
    response = await client.post("/api/chat", json=chat_body("c-tr", "hello"))
    assert response.status_code == 200
    await runtime.manager.wait_settled("c-tr")
    row = await runtime.db.conversations.get("c-tr")
    assert row is not None and row.trace_id == trace_id_for("c-tr")
    trace = (await client.get("/api/conversations/c-tr/trace")).json()
    assert trace["traceId"] == trace_id_for("c-tr")
    names = [s["name"] for s in trace["spans"]]
    assert names[0] == "ai.turn" and "chat scripted:echo" in names
    assert (await client.get("/api/conversations/nope/trace")).status_code == 404


def test_the_claude_cli_gets_the_sessions_traceparent(tmp_path: Path) -> None:
    from opentelemetry import trace as otel_trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    from drupe.observability.turn_spans import container_context, traceparent_for
    from drupe.sessions.drivers.base import ConnectInput, SessionInfo, TraceContext
    from drupe.sessions.drivers.claude_code.driver import ClaudeCodeConfig, build_options

    conversation = "agent-session:sess_1"
    info = SessionInfo(
        session_id="sess_1", agent_id="a", agent_name="a", driver_type="claude-code", model_id="m"
    )
    traced = ConnectInput(
        session=info,
        model_id="m",
        trace=TraceContext(conversation_id=conversation, traceparent=traceparent_for(conversation)),
    )
    env = build_options(ClaudeCodeConfig(env={"HOME": "/h"}), traced, tmp_path).env
    assert env["HOME"] == "/h"
    parsed = otel_trace.get_current_span(
        TraceContextTextMapPropagator().extract({"traceparent": env["TRACEPARENT"]})
    ).get_span_context()
    expected = otel_trace.get_current_span(container_context(conversation)).get_span_context()
    assert f"{parsed.trace_id:032x}" == trace_id_for(conversation)
    assert (parsed.trace_id, parsed.span_id) == (expected.trace_id, expected.span_id)
    untraced = build_options(ClaudeCodeConfig(), ConnectInput(session=info, model_id="m"), tmp_path)
    assert "TRACEPARENT" not in untraced.env
