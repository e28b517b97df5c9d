"""The Anthropic Messages dialect: request -> ``PromptSpec``, UI chunks -> named SSE events.

Owns parsing a ``POST /v1/messages`` body (``system``, content blocks, client tools, sampling
settings) into the agent loop's input; the stream of named events ``message_start``,
``content_block_start`` / ``content_block_delta`` (``text_delta``, ``thinking_delta``,
``signature_delta``, ``input_json_delta``) / ``content_block_stop``, ``message_delta``
(``stop_reason``, cumulative ``usage``) and ``message_stop``; the non-streaming ``message``
body; and the error shape ``{"type": "error", "error": {"type", "message"}}`` (``event: error``
in a stream).

History mapping: ``system`` becomes a UI ``system`` message; an assistant message becomes one UI
assistant message (``thinking`` with its signature in ``providerMetadata.drupe``, text,
``tool_use`` as ``dynamic-tool`` parts); a user message's ``tool_result`` blocks fill those
parts' outputs and its other blocks (text, image) become a UI user message. Only calls of tools
the client declared are streamed back as ``tool_use`` blocks. Pure: no I/O. The request side
(parsing and the history mapping) is ``anthropic_request``; it is re-exported here.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from drupe.agent.models.registry import ModelInfo
from drupe.chunks.types import PROVIDER_METADATA_KEY, Chunk
from drupe.gateway.anthropic_request import AnthropicMessages, parse_messages_request
from drupe.gateway.prompt import GatewayFailure

__all__ = [
    "AnthropicDialect",
    "AnthropicMessages",
    "anthropic_error_body",
    "anthropic_model_object",
    "anthropic_models_body",
    "parse_messages_request",
]

_ERROR_TYPES: Final[Mapping[str, str]] = {
    "invalid_request": "invalid_request_error",
    "authentication": "authentication_error",
    "forbidden": "permission_error",
    "not_found": "not_found_error",
    "model_not_found": "not_found_error",
    "conflict": "invalid_request_error",
    "too_large": "request_too_large",
    "rate_limit": "rate_limit_error",
    "upstream": "api_error",
    "timeout": "timeout_error",
    "aborted": "api_error",
    "internal": "api_error",
    "unavailable": "overloaded_error",
}

_STOP: Final[Mapping[str, str]] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool-calls": "tool_use",
    "content-filter": "refusal",
}


def anthropic_error_body(failure: GatewayFailure) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": _ERROR_TYPES[failure.kind], "message": failure.message},
    }


def anthropic_model_object(model_id: str, label: str | None = None) -> dict[str, Any]:
    """One model as the Models API shows it."""
    return {
        "type": "model",
        "id": model_id,
        "display_name": label or model_id,
        "created_at": "1970-01-01T00:00:00Z",
    }


def anthropic_models_body(models: Sequence[ModelInfo]) -> dict[str, Any]:
    """``GET /v1/models`` for a client that sent ``anthropic-version``."""
    data = [anthropic_model_object(info.id, info.label) for info in models]
    return {
        "data": data,
        "has_more": False,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
    }


# --- reply ---------------------------------------------------------------------------------


def _event(kind: str, payload: Mapping[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


class AnthropicDialect:
    """Folds UI chunks into Messages API stream events, or one ``message`` body."""

    def __init__(self, request: AnthropicMessages) -> None:
        self.model = request.model
        self.declared = request.declared_tools
        self.id = f"msg_{uuid.uuid4().hex[:24]}"
        self.blocks: list[dict[str, Any]] = []
        self.open: dict[str, int] = {}
        self.raw_input: dict[int, str] = {}
        self.stop_reason: str | None = None
        self.usage: Mapping[str, Any] = {}
        self._started = False

    def _message_start(self) -> list[bytes]:
        if self._started:
            return []
        self._started = True
        message: dict[str, Any] = {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return [_event("message_start", {"type": "message_start", "message": message})]

    def _open(self, key: str, block: dict[str, Any]) -> list[bytes]:
        index = len(self.blocks)
        self.blocks.append(block)
        self.open[key] = index
        head = {"type": "content_block_start", "index": index, "content_block": dict(block)}
        return [*self._message_start(), _event("content_block_start", head)]

    def _delta(self, index: int, delta: Mapping[str, Any]) -> bytes:
        payload = {"type": "content_block_delta", "index": index, "delta": delta}
        return _event("content_block_delta", payload)

    def _close(self, key: str) -> list[bytes]:
        index = self.open.pop(key, None)
        if index is None:
            return []
        return [_event("content_block_stop", {"type": "content_block_stop", "index": index})]

    def feed(self, chunk: Chunk) -> list[bytes]:
        kind = chunk.get("type")
        key = str(chunk.get("id") or chunk.get("toolCallId") or "")
        if kind == "start":
            return self._message_start()
        if kind == "text-start":
            return self._open(key, {"type": "text", "text": ""})
        if kind == "reasoning-start":
            return self._open(key, {"type": "thinking", "thinking": "", "signature": ""})
        if kind in ("text-delta", "reasoning-delta"):
            index = self.open.get(key)
            if index is None:
                return []
            text = str(chunk.get("delta", ""))
            if kind == "text-delta":
                self.blocks[index]["text"] += text
                return [self._delta(index, {"type": "text_delta", "text": text})]
            self.blocks[index]["thinking"] += text
            return [self._delta(index, {"type": "thinking_delta", "thinking": text})]
        if kind in ("text-end", "reasoning-end"):
            return self._end_text(key, chunk)
        if kind == "tool-input-start":
            name = str(chunk.get("toolName", ""))
            if name not in self.declared or key in self.open:
                return []
            frames = self._open(key, {"type": "tool_use", "id": key, "name": name, "input": {}})
            self.raw_input[self.open[key]] = ""
            return frames
        if kind in ("tool-input-delta", "tool-input-available", "tool-input-error"):
            return self._tool_input(key, chunk)
        if kind == "message-metadata":
            metadata = chunk.get("messageMetadata")
            usage = metadata.get("usage") if isinstance(metadata, dict) else None
            if isinstance(usage, dict):
                self.usage = usage
            return []
        if kind == "finish":
            return self._finish_chunk(str(chunk.get("finishReason") or "stop"))
        return []

    def _end_text(self, key: str, chunk: Chunk) -> list[bytes]:
        index = self.open.get(key)
        if index is None:
            return []
        frames: list[bytes] = []
        if chunk.get("type") == "reasoning-end":
            metadata = chunk.get("providerMetadata") or {}
            carried = metadata.get(PROVIDER_METADATA_KEY) if isinstance(metadata, dict) else None
            signature = carried.get("signature") if isinstance(carried, dict) else None
            if signature:
                self.blocks[index]["signature"] = str(signature)
                frames.append(
                    self._delta(index, {"type": "signature_delta", "signature": signature})
                )
        return frames + self._close(key)

    def _tool_input(self, key: str, chunk: Chunk) -> list[bytes]:
        index = self.open.get(key)
        if index is None:
            return []
        kind = chunk.get("type")
        if kind == "tool-input-delta":
            piece = str(chunk.get("inputTextDelta", ""))
            self.raw_input[index] += piece
            return (
                [self._delta(index, {"type": "input_json_delta", "partial_json": piece})]
                if piece
                else []
            )
        frames: list[bytes] = []
        tool_input = chunk.get("input")
        if kind == "tool-input-available" and isinstance(tool_input, dict):
            self.blocks[index]["input"] = tool_input
            if not self.raw_input[index]:
                piece = orjson.dumps(tool_input).decode()
                frames.append(
                    self._delta(index, {"type": "input_json_delta", "partial_json": piece})
                )
        return frames + self._close(key)

    def _finish_chunk(self, reason: str) -> list[bytes]:
        self.stop_reason = _STOP.get(reason, "end_turn")
        if self.stop_reason == "tool_use" and not any(b["type"] == "tool_use" for b in self.blocks):
            self.stop_reason = "end_turn"
        frames = self._message_start()
        for key in list(self.open):
            frames += self._close(key)
        delta = {"stop_reason": self.stop_reason, "stop_sequence": None}
        payload = {"type": "message_delta", "delta": delta, "usage": self._usage()}
        frames.append(_event("message_delta", payload))
        return frames

    def _usage(self) -> dict[str, int]:
        return {
            "input_tokens": int(self.usage.get("inputTokens", 0) or 0),
            "output_tokens": int(self.usage.get("outputTokens", 0) or 0),
        }

    def finish(self) -> list[bytes]:
        return [_event("message_stop", {"type": "message_stop"})]

    def body(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": self.blocks,
            "stop_reason": self.stop_reason or "end_turn",
            "stop_sequence": None,
            "usage": self._usage(),
        }

    def error_body(self, failure: GatewayFailure) -> dict[str, Any]:
        return anthropic_error_body(failure)

    def error_frame(self, failure: GatewayFailure) -> bytes:
        return _event("error", anthropic_error_body(failure))
