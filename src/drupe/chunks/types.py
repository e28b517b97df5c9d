"""Typed shapes of UI message stream chunks and UI messages.

Chunks travel as plain JSON objects (``dict``): they are read once from the model and fanned out
to every listener, so they are never copied into another representation on the hot path. The
``TypedDict`` classes below document and type-check each shape; ``drupe.chunks.codec`` validates
untrusted input against them. Wire strings keep the protocol's spelling (``"text-delta"``).

Contract: a chunk is never mutated after it has been emitted.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    "CHUNK_TYPES",
    "DELTA_TYPES",
    "FINISH_REASONS",
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


FinishReason = Literal["stop", "length", "content-filter", "tool-calls", "error", "other"]
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


# --- typed shapes (documentation and static checking; the runtime value is a dict) -----------


class StartChunk(TypedDict):
    type: Literal["start"]
    messageId: NotRequired[str]
    messageMetadata: NotRequired[Any]


class StepChunk(TypedDict):
    type: Literal["start-step", "finish-step"]


class FinishChunk(TypedDict):
    type: Literal["finish"]
    finishReason: NotRequired[FinishReason]
    messageMetadata: NotRequired[Any]


class AbortChunk(TypedDict):
    type: Literal["abort"]
    reason: NotRequired[str]


class ErrorChunk(TypedDict):
    type: Literal["error"]
    errorText: str


class MessageMetadataChunk(TypedDict):
    type: Literal["message-metadata"]
    messageMetadata: Any


class TextBoundaryChunk(TypedDict):
    type: Literal["text-start", "text-end", "reasoning-start", "reasoning-end"]
    id: str
    providerMetadata: NotRequired[Any]


class TextDeltaChunk(TypedDict):
    type: Literal["text-delta", "reasoning-delta"]
    id: str
    delta: str
    providerMetadata: NotRequired[Any]


class ToolInputStartChunk(TypedDict):
    type: Literal["tool-input-start"]
    toolCallId: str
    toolName: str
    inputEncoding: NotRequired[Literal["json", "text"]]
    """How the input deltas are encoded (``json`` when absent; ``text`` keeps the raw text)."""
    providerExecuted: NotRequired[bool]
    toolMetadata: NotRequired[dict[str, Any]]
    dynamic: NotRequired[bool]
    title: NotRequired[str]
    providerMetadata: NotRequired[Any]


class ToolInputDeltaChunk(TypedDict):
    type: Literal["tool-input-delta"]
    toolCallId: str
    inputTextDelta: str


class ToolInputAvailableChunk(TypedDict):
    type: Literal["tool-input-available"]
    toolCallId: str
    toolName: str
    input: Any
    providerExecuted: NotRequired[bool]
    providerMetadata: NotRequired[Any]
    toolMetadata: NotRequired[dict[str, Any]]
    dynamic: NotRequired[bool]
    title: NotRequired[str]


class ToolInputErrorChunk(TypedDict):
    type: Literal["tool-input-error"]
    toolCallId: str
    toolName: str
    input: Any
    errorText: str
    providerExecuted: NotRequired[bool]
    providerMetadata: NotRequired[Any]
    toolMetadata: NotRequired[dict[str, Any]]
    dynamic: NotRequired[bool]
    title: NotRequired[str]


class ToolApprovalRequestChunk(TypedDict):
    type: Literal["tool-approval-request"]
    approvalId: str
    toolCallId: str
    approvalDescriptor: NotRequired[Any]
    inputSchemaInput: NotRequired[Any]
    signature: NotRequired[str]


class ToolOutputAvailableChunk(TypedDict):
    type: Literal["tool-output-available"]
    toolCallId: str
    output: Any
    providerExecuted: NotRequired[bool]
    providerMetadata: NotRequired[Any]
    toolMetadata: NotRequired[dict[str, Any]]
    dynamic: NotRequired[bool]
    preliminary: NotRequired[bool]


class ToolOutputErrorChunk(TypedDict):
    type: Literal["tool-output-error"]
    toolCallId: str
    errorText: str
    providerExecuted: NotRequired[bool]
    providerMetadata: NotRequired[Any]
    toolMetadata: NotRequired[dict[str, Any]]
    dynamic: NotRequired[bool]


class ToolOutputDeniedChunk(TypedDict):
    type: Literal["tool-output-denied"]
    toolCallId: str


class SourceUrlChunk(TypedDict):
    type: Literal["source-url"]
    sourceId: str
    url: str
    title: NotRequired[str]
    providerMetadata: NotRequired[Any]


class SourceDocumentChunk(TypedDict):
    type: Literal["source-document"]
    sourceId: str
    mediaType: str
    title: str
    filename: NotRequired[str]
    providerMetadata: NotRequired[Any]


class FileChunk(TypedDict):
    type: Literal["file"]
    url: str
    mediaType: str
    providerMetadata: NotRequired[Any]


class DataChunk(TypedDict):
    """``data-<name>``: ``type`` is ``"data-" + name``; same type+id replaces the part."""

    type: str
    data: Any
    id: NotRequired[str]
    transient: NotRequired[bool]
