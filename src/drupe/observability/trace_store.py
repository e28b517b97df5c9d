"""Conversation traces: the span collector, the local JSONL store, and the flush at terminal.

* ``SpanCollector`` is a span processor: every ended span that carries ``drupe.conversation_id``
  is kept in memory under that conversation (bounded: ``max_buffered`` spans per conversation,
  ``max_conversations`` conversations; the oldest are dropped first).
* ``TraceStore`` keeps each conversation's spans as one JSONL file under ``<data dir>/traces/``
  (named by a hash of the conversation id). Retention: at most ``max_files`` files (the least
  recently written go first), none older than ``max_age``, and at most ``max_spans`` spans per
  file (the oldest lines go first). ``read`` returns a conversation's spans, oldest first.
* ``TraceRecorder`` ties them to a tracer: ``flush(conversation_id)`` takes the collected spans
  and writes them to the store and, when one is configured, to the OTLP exporter. A
  cleanup-phase listener ``schedule``s a flush at each execution terminal; the recorder's own
  task writes it, so a terminal never waits on I/O. A failure only logs a warning.

A span is stored as a flat dict: ``traceId``, ``spanId``, ``parentId``, ``name``, ``start`` and
``end`` (epoch nanoseconds), ``status`` (``OK``/``ERROR``/``UNSET``), ``statusMessage`` and
``attributes``. Attributes never hold message content.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import orjson
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from drupe.lifetimes import TaskOwner

__all__ = [
    "SpanCollector",
    "TraceRecorder",
    "TraceStore",
    "otlp_exporter_from_env",
    "span_json",
]

log = logging.getLogger(__name__)

CONVERSATION_ATTRIBUTE = "drupe.conversation_id"


def span_json(span: ReadableSpan) -> dict[str, Any]:
    context = span.context
    parent = span.parent
    return {
        "traceId": f"{context.trace_id:032x}" if context is not None else None,
        "spanId": f"{context.span_id:016x}" if context is not None else None,
        "parentId": f"{parent.span_id:016x}" if parent is not None else None,
        "name": span.name,
        "start": span.start_time,
        "end": span.end_time,
        "status": span.status.status_code.name,
        "statusMessage": span.status.description,
        "attributes": {k: _plain(v) for k, v in (span.attributes or {}).items()},
    }


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


class SpanCollector(SpanProcessor):
    """Keeps ended spans per conversation until they are flushed."""

    def __init__(self, *, max_buffered: int = 5_000, max_conversations: int = 1_000) -> None:
        self.max_buffered = max_buffered
        self.max_conversations = max_conversations
        self._spans: OrderedDict[str, list[ReadableSpan]] = OrderedDict()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        conversation_id = (span.attributes or {}).get(CONVERSATION_ATTRIBUTE)
        if not isinstance(conversation_id, str):
            return
        bucket = self._spans.setdefault(conversation_id, [])
        self._spans.move_to_end(conversation_id)
        bucket.append(span)
        if len(bucket) > self.max_buffered:
            del bucket[: len(bucket) - self.max_buffered]
        while len(self._spans) > self.max_conversations:
            self._spans.popitem(last=False)

    def take(self, conversation_id: str) -> list[ReadableSpan]:
        return self._spans.pop(conversation_id, [])

    def shutdown(self) -> None:
        self._spans.clear()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


class TraceStore:
    """One JSONL file of spans per conversation, with a retention bound."""

    def __init__(
        self,
        root: Path,
        *,
        max_files: int = 500,
        max_age: timedelta = timedelta(days=14),
        max_spans: int = 10_000,
    ) -> None:
        self.root = root
        self.max_files = max_files
        self.max_age = max_age
        self.max_spans = max_spans

    def path_for(self, conversation_id: str) -> Path:
        digest = hashlib.sha256(conversation_id.encode()).hexdigest()[:40]
        return self.root / f"{digest}.jsonl"

    def append(self, conversation_id: str, spans: Sequence[dict[str, Any]]) -> None:
        """Add spans to the conversation's file, then apply the retention bound (blocking I/O)."""
        if not spans:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.path_for(conversation_id)
        lines = [orjson.dumps({"conversationId": conversation_id, **s}) for s in spans]
        existing = path.read_bytes().splitlines() if path.exists() else []
        kept = [*existing, *lines][-self.max_spans :]
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(b"\n".join(kept) + b"\n")
        os.replace(tmp, path)
        self.prune()

    def read(self, conversation_id: str) -> list[dict[str, Any]]:
        path = self.path_for(conversation_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return []
        spans = [orjson.loads(line) for line in data.splitlines() if line.strip()]
        return sorted(spans, key=lambda s: s.get("start") or 0)

    def prune(self) -> int:
        """Delete files past the age bound and the oldest beyond ``max_files``; return how many."""
        try:
            files = sorted(self.root.glob("*.jsonl"), key=lambda p: p.stat().st_mtime)
        except FileNotFoundError:
            return 0
        cutoff = time.time() - self.max_age.total_seconds()
        doomed = [p for p in files if p.stat().st_mtime < cutoff]
        fresh = [p for p in files if p not in doomed]
        doomed += fresh[: max(0, len(fresh) - self.max_files)]
        for path in doomed:
            path.unlink(missing_ok=True)
        return len(doomed)


class TraceRecorder(TaskOwner):
    """A private tracer provider whose conversation spans are flushed after each terminal.

    Use as an async context manager: it owns the one task that writes flushes, so a terminal
    never waits on disk or network I/O. ``schedule(conversation_id)`` queues a flush (bounded:
    when ``max_queued`` are waiting, the request is dropped with a warning and the spans wait
    for the conversation's next terminal); ``idle()`` returns once nothing is queued or being
    written. On exit the queue is drained (bounded by ``drain_timeout``).
    """

    def __init__(
        self,
        store: TraceStore | None,
        exporter: SpanExporter | None = None,
        *,
        max_queued: int = 1_000,
        drain_timeout: float = 5.0,
    ) -> None:
        self.store = store
        self.exporter = exporter
        self.collector = SpanCollector()
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.collector)
        self.tracer = self.provider.get_tracer("drupe")
        self.max_queued = max_queued
        self.drain_timeout = drain_timeout
        self._pending = 0
        self._changed = anyio.Event()
        self._send: MemoryObjectSendStream[str] | None = None

    async def _start_tasks(self, group: anyio.abc.TaskGroup) -> None:
        send, receive = anyio.create_memory_object_stream[str](self.max_queued)
        self._send = send
        group.start_soon(self._pump, receive)

    async def _before_cancel(self) -> None:
        assert self._send is not None
        self._send.close()
        with anyio.move_on_after(self.drain_timeout, shield=True):
            await self.idle()

    async def _after_tasks(self) -> None:
        self.shutdown()

    def schedule(self, conversation_id: str) -> None:
        """Queue a flush of the conversation's spans; never blocks."""
        if self._send is None:
            return
        try:
            self._send.send_nowait(conversation_id)
        except anyio.WouldBlock:
            log.warning(
                "trace flush queue full; %r is flushed at its next terminal", conversation_id
            )
            return
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return
        self._pending += 1

    async def idle(self) -> None:
        """Return once every queued flush was written."""
        while self._pending:
            await self._changed.wait()

    async def _pump(self, receive: MemoryObjectReceiveStream[str]) -> None:
        async with receive:
            async for conversation_id in receive:
                try:
                    await self.flush(conversation_id)
                finally:
                    self._pending -= 1
                    self._changed.set()
                    self._changed = anyio.Event()

    async def flush(self, conversation_id: str) -> None:
        """Write the conversation's collected spans out now; a failure only warns."""
        spans = self.collector.take(conversation_id)
        if not spans:
            return
        try:
            await anyio.to_thread.run_sync(self._write, conversation_id, spans)
        except Exception as err:  # isolation boundary: a trace flush never fails a turn
            log.warning("trace flush of %r failed: %s", conversation_id, err)

    def _write(self, conversation_id: str, spans: list[ReadableSpan]) -> None:
        failures: list[str] = []
        if self.store is not None:
            try:
                self.store.append(conversation_id, [span_json(s) for s in spans])
            except OSError as err:
                failures.append(f"local store: {err}")
        if self.exporter is not None:
            result = self.exporter.export(spans)
            if result is not SpanExportResult.SUCCESS:
                failures.append("OTLP export failed")
        if failures:
            raise RuntimeError("; ".join(failures))

    def shutdown(self) -> None:
        if self.exporter is not None:
            self.exporter.shutdown()
        self.provider.shutdown()


def otlp_exporter_from_env(env: dict[str, str] | None = None) -> SpanExporter | None:
    """The OTLP/HTTP exporter when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set and it is installed."""
    env = dict(os.environ) if env is None else env
    if not env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return None
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[import-not-found,unused-ignore]
            OTLPSpanExporter,
        )
    except ImportError:
        log.warning(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but opentelemetry-exporter-otlp is not "
            "installed; spans are kept in the local trace store only"
        )
        return None
    exporter: SpanExporter = OTLPSpanExporter()
    return exporter
