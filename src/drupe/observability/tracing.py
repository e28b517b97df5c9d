"""OpenTelemetry tracing: one ``ai.turn`` span per execution (reference §9 "Tracing").

The stream manager opens the span when an execution starts and ends it at the terminal:
status OK on success, ERROR ``aborted: <reason>`` on a stop, ERROR with the message on an error.
The span is the current span while the execution's source runs, so spans made by the agent loop
or by pydantic-ai nest under it. ``configure_tracing`` installs an SDK tracer provider, with an
OTLP exporter when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set and the exporter package is installed.
Attributes never carry message content or secrets.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

__all__ = ["TURN_SPAN", "configure_tracing", "get_tracer"]

log = logging.getLogger(__name__)

TURN_SPAN = "ai.turn"


def get_tracer() -> trace.Tracer:
    """Drupe's tracer (a no-op until a tracer provider is configured)."""
    return trace.get_tracer("drupe")


def configure_tracing(
    env: Mapping[str, str] | None = None, *, processor: SpanProcessor | None = None
) -> TracerProvider | None:
    """Install a tracer provider when tracing is wanted; returns it (None: tracing stays off).

    Tracing is on when ``processor`` is given (tests) or ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set.
    """
    env = os.environ if env is None else env
    endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if processor is None and not endpoint:
        return None
    provider = TracerProvider(resource=Resource.create({"service.name": "drupe"}))
    if processor is not None:
        provider.add_span_processor(processor)
    if endpoint:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[import-not-found,unused-ignore]
                OTLPSpanExporter,
            )
        except ImportError:
            log.warning(
                "OTEL_EXPORTER_OTLP_ENDPOINT is set but opentelemetry-exporter-otlp is not "
                "installed; spans are not exported"
            )
        else:
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider
