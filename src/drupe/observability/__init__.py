"""Observability: OpenTelemetry tracing set-up, span names and attributes."""

from __future__ import annotations
