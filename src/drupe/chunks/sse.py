"""Server-sent-event framing of the UI message stream (protocol v1).

Owns: the response headers, the ``[DONE]`` frame and the encoding of one chunk into one SSE event
(``data: <json>\\n\\n``), optionally preceded by an ``id:`` line that carries Drupe's resume cursor
(the AI SDK client ignores ``id:`` lines, Drupe's own clients resume with ``Last-Event-ID``).

Must never: import a web framework, or do more than bytes concatenation on the hot path
(``encode_chunk``); orjson never emits a raw newline, so a serialised chunk is always one line.
"""

from __future__ import annotations

from typing import Final

import orjson

from drupe.chunks.types import Chunk
from drupe.errors import UsageError

__all__ = [
    "DONE_FRAME",
    "UI_MESSAGE_STREAM_HEADERS",
    "encode_chunk",
    "encode_sse",
]

UI_MESSAGE_STREAM_HEADERS: Final[dict[str, str]] = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "connection": "keep-alive",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}
"""Headers of a UI message stream response (``UI_MESSAGE_STREAM_HEADERS`` in the AI SDK)."""

DONE_FRAME: Final[bytes] = b"data: [DONE]\n\n"
"""The last event of every UI message stream."""


def _field_line(name: bytes, value: str) -> bytes:
    if "\n" in value or "\r" in value:
        raise UsageError(f"SSE {name.decode()} must be one line, got {value!r}")
    return name + value.encode() + b"\n"


def encode_sse(data: bytes, *, event_id: str | None = None, event: str | None = None) -> bytes:
    """Frame ``data`` as one SSE event.

    A payload containing line breaks (``\\n``, ``\\r\\n`` or ``\\r``) is split into one ``data:``
    line per line, which an SSE parser joins back with ``\\n``.
    """
    head = b""
    if event_id is not None:
        head = _field_line(b"id: ", event_id)
    if event is not None:
        head += _field_line(b"event: ", event)
    if b"\n" in data or b"\r" in data:
        lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        return head + b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"
    return head + b"data: " + data + b"\n\n"


def encode_chunk(chunk: Chunk, *, event_id: str | None = None) -> bytes:
    """Serialise and frame one chunk: ``[id: <event_id>\\n]data: <json>\\n\\n``."""
    if event_id is None:
        return b"data: " + orjson.dumps(chunk) + b"\n\n"
    if "\n" in event_id or "\r" in event_id:
        raise UsageError(f"SSE id must be one line, got {event_id!r}")
    return b"id: " + event_id.encode() + b"\ndata: " + orjson.dumps(chunk) + b"\n\n"
