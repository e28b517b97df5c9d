"""The wire vocabulary: Vercel AI SDK UI message stream v1 chunks (``ai`` v6 chunk set).

A chunk is a JSON object (a ``dict``) whose ``type`` key names it; ``types`` gives the typed
shapes, ``codec`` validates and serialises them, ``sse`` frames them, ``accumulate`` folds them
into a message (``partial_json`` and ``metadata`` port the SDK helpers it needs), ``replay``
compacts a buffered run for late subscribers, and ``normalize`` cleans a final message before it is
persisted. Everything here is
pure and synchronous, and never imports the web framework or the database.
"""

from __future__ import annotations

from drupe.chunks.accumulate import AccumulateError, Accumulator, accumulate
from drupe.chunks.codec import dumps, loads, validate_chunk
from drupe.chunks.replay import compact_replay
from drupe.chunks.sse import DONE_FRAME, UI_MESSAGE_STREAM_HEADERS, encode_chunk, encode_sse
from drupe.chunks.types import Chunk, UIMessage, UIPart

__all__ = [
    "DONE_FRAME",
    "UI_MESSAGE_STREAM_HEADERS",
    "AccumulateError",
    "Accumulator",
    "Chunk",
    "UIMessage",
    "UIPart",
    "accumulate",
    "compact_replay",
    "dumps",
    "encode_chunk",
    "encode_sse",
    "loads",
    "validate_chunk",
]
