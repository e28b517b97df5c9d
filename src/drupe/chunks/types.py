"""Typed shapes of UI message stream chunks and UI messages.

Chunks travel as plain JSON objects (``dict``): they are read once from the model and fanned out
to every listener, so they are never copied into another representation on the hot path. The
shapes of the ``ai`` v6 chunk set live in one place, ``drupe.chunks.codec``'s schema table,
which validates untrusted input; ``Chunk`` stays a plain ``dict`` type (no per-type
``TypedDict``s: nothing consumed them, and the hot path reads keys directly). Wire strings keep
the protocol's spelling (``"text-delta"``).

Contract: a chunk is never mutated after it has been emitted.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    "CHUNK_TYPES",
    "DELTA_TYPES",
    "FINISH_REASONS",
    "PROVIDER_METADATA_KEY",
    "Chunk",
    "UIMessage",
    "UIPart",
    "is_data_type",
]

Chunk = dict[str, Any]
"""One UI message stream chunk: a JSON object with a ``type`` key."""

UIPart = dict[str, Any]
"""One part of a UI message (``text``, ``reasoning``, ``tool-<name>``, ``data-<name>``, ...)."""


class UIMessage(TypedDict):
    """A UI message as the AI SDK's ``readUIMessageStream`` builds it."""

    id: str
    role: Literal["user", "assistant", "system"]
    parts: list[UIPart]
    metadata: NotRequired[Any]


PROVIDER_METADATA_KEY = "drupe"
"""The ``providerMetadata`` key under which Drupe carries what a provider needs back (a thinking
part's signature, id and provider name on ``reasoning-end``)."""

FINISH_REASONS: frozenset[str] = frozenset(
    ("stop", "length", "content-filter", "tool-calls", "error", "other")
)

CHUNK_TYPES: frozenset[str] = frozenset(
    (
        "start",
        "start-step",
        "finish-step",
        "finish",
        "abort",
        "error",
        "message-metadata",
        "text-start",
        "text-delta",
        "text-end",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
        "tool-input-error",
        "tool-approval-request",
        "tool-output-available",
        "tool-output-error",
        "tool-output-denied",
        "source-url",
        "source-document",
        "file",
    )
)
"""Every fixed chunk type of the ``ai`` v6 set; ``data-<name>`` chunks come on top."""

DELTA_TYPES: frozenset[str] = frozenset(("text-delta", "reasoning-delta", "tool-input-delta"))
"""Chunk types whose contiguous runs (same part) merge into one buffered entry."""


def is_data_type(chunk_type: str) -> bool:
    """Return whether ``chunk_type`` is a custom ``data-<name>`` chunk type."""
    return chunk_type.startswith("data-") and len(chunk_type) > 5
