"""Listeners: consumers of a stream's chunks and terminal results (browser, SSE, persistence)."""

from __future__ import annotations
