"""The OpenAI chat-completions dialect: request -> ``PromptSpec``, UI chunks -> OpenAI frames.

Owns parsing a ``POST /v1/chat/completions`` body (messages, client tools, sampling settings,
``stream`` and ``stream_options.include_usage``) into the agent loop's input, the
``chat.completion.chunk`` frames of a stream (``delta.content``, ``delta.reasoning_content``,
``delta.tool_calls``, ``finish_reason``, a final ``usage`` chunk when asked, ``data: [DONE]``),
the non-streaming ``chat.completion`` body, the ``/v1/models`` list and the error shape
``{"error": {"message", "type", "param", "code"}}``.

History mapping: ``system``/``developer`` messages become UI ``system`` messages; ``user``
content (text, ``image_url``) becomes text and file parts; an ``assistant`` message becomes one
UI assistant message (reasoning, text, one ``dynamic-tool`` part per ``tool_calls`` entry) and
the following ``tool`` messages fill those parts' outputs. Only calls of tools the client
declared are written back as ``tool_calls``. Pure: no I/O. The request side (parsing and the
history mapping) is ``openai_request``; it is re-exported here.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from drupe.agent.models.registry import ModelInfo
from drupe.chunks.types import Chunk
from drupe.gateway.openai_request import OpenAIChat, parse_chat_request
from drupe.gateway.prompt import GatewayFailure

__all__ = [
    "OpenAIChat",
    "OpenAIDialect",
    "model_object",
    "models_body",
    "openai_error_body",
    "parse_chat_request",
]

_ERROR_TYPES: Final[Mapping[str, tuple[str, str | None]]] = {
    "invalid_request": ("invalid_request_error", None),
    "authentication": ("invalid_request_error", "invalid_api_key"),
    "forbidden": ("permission_error", "insufficient_permissions"),
    "not_found": ("invalid_request_error", "not_found"),
    "model_not_found": ("invalid_request_error", "model_not_found"),
    "conflict": ("invalid_request_error", "conflict"),
    "too_large": ("invalid_request_error", "request_too_large"),
    "rate_limit": ("rate_limit_error", "rate_limit_exceeded"),
    "upstream": ("api_error", "upstream_error"),
    "timeout": ("timeout", "gateway_timeout"),
    "aborted": ("api_error", "stream_aborted"),
    "internal": ("server_error", None),
    "unavailable": ("api_error", "unavailable"),
}

_FINISH: Final[Mapping[str, str]] = {
    "stop": "stop",
    "length": "length",
    "tool-calls": "tool_calls",
    "content-filter": "content_filter",
}

DONE: Final = b"data: [DONE]\n\n"


def openai_error_body(failure: GatewayFailure) -> dict[str, Any]:
    kind, code = _ERROR_TYPES[failure.kind]
    return {"error": {"message": failure.message, "type": kind, "param": None, "code": code}}


def model_object(model_id: str) -> dict[str, Any]:
    """One entry of ``GET /v1/models`` (``owned_by`` is the provider part of the id)."""
    return {"id": model_id, "object": "model", "created": 0, "owned_by": model_id.split(":")[0]}


def models_body(models: Sequence[ModelInfo]) -> dict[str, Any]:
    """``GET /v1/models``: every model the registry lists, ids ``provider:model``."""
    return {"object": "list", "data": [model_object(info.id) for info in models]}


# --- reply ---------------------------------------------------------------------------------


def _sse(payload: Mapping[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


@dataclass(slots=True)
class _Call:
    index: int
    call_id: str
    name: str
    arguments: str = ""


class OpenAIDialect:
    """Folds UI chunks into chat-completion chunks (streaming) or one completion body."""

    def __init__(self, chat: OpenAIChat) -> None:
        self.model = chat.model
        self.include_usage = chat.include_usage
        self.declared = chat.declared_tools
        self.id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        self.created = int(time.time())
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[str, _Call] = {}
        self.finish_reason: str | None = None
        self.usage: Mapping[str, Any] = {}
        self._role_sent = False

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        if not self._role_sent:
            self._role_sent = True
            delta = {"role": "assistant", **delta}
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _sse(self._envelope("chat.completion.chunk", choices=[choice]))

    def _envelope(self, kind: str, **fields: Any) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": kind,
            "created": self.created,
            "model": self.model,
            **fields,
        }

    def feed(self, chunk: Chunk) -> list[bytes]:
        kind = chunk.get("type")
        if kind == "text-delta":
            delta = str(chunk.get("delta", ""))
            self.text.append(delta)
            return [self._chunk({"content": delta})]
        if kind == "reasoning-delta":
            delta = str(chunk.get("delta", ""))
            self.reasoning.append(delta)
            return [self._chunk({"reasoning_content": delta})]
        if kind == "tool-input-start":
            name = str(chunk.get("toolName", ""))
            call_id = str(chunk.get("toolCallId", ""))
            if name not in self.declared or call_id in self.calls:
                return []
            call = self.calls[call_id] = _Call(len(self.calls), call_id, name)
            head = {"index": call.index, "id": call_id, "type": "function"}
            return [
                self._chunk({"tool_calls": [{**head, "function": {"name": name, "arguments": ""}}]})
            ]
        if kind in ("tool-input-delta", "tool-input-available"):
            return self._tool_arguments(chunk)
        if kind == "message-metadata":
            metadata = chunk.get("messageMetadata")
            usage = metadata.get("usage") if isinstance(metadata, dict) else None
            if isinstance(usage, dict):
                self.usage = usage
            return []
        if kind == "finish":
            reason = str(chunk.get("finishReason") or "stop")
            self.finish_reason = _FINISH.get(reason, "stop")
            if self.finish_reason == "tool_calls" and not self.calls:
                self.finish_reason = "stop"
            frames = [self._chunk({}, self.finish_reason)]
            if self.include_usage:
                frames.append(
                    _sse(self._envelope("chat.completion.chunk", choices=[], usage=self._usage()))
                )
            return frames
        return []

    def _tool_arguments(self, chunk: Chunk) -> list[bytes]:
        call = self.calls.get(str(chunk.get("toolCallId", "")))
        if call is None:
            return []
        if chunk.get("type") == "tool-input-delta":
            piece = str(chunk.get("inputTextDelta", ""))
        elif not call.arguments:
            piece = orjson.dumps(chunk.get("input") or {}).decode()
        else:
            return []
        if not piece:
            return []
        call.arguments += piece
        return [
            self._chunk({"tool_calls": [{"index": call.index, "function": {"arguments": piece}}]})
        ]

    def _usage(self) -> dict[str, Any]:
        prompt = int(self.usage.get("inputTokens", 0) or 0)
        completion = int(self.usage.get("outputTokens", 0) or 0)
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        if reasoning := self.usage.get("reasoningTokens"):
            usage["completion_tokens_details"] = {"reasoning_tokens": int(reasoning)}
        if cached := self.usage.get("cachedInputTokens"):
            usage["prompt_tokens_details"] = {"cached_tokens": int(cached)}
        return usage

    def finish(self) -> list[bytes]:
        return [DONE]

    def body(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments or "{}"},
                }
                for call in self.calls.values()
            ]
        choice = {
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": self.finish_reason or "stop",
        }
        return self._envelope("chat.completion", choices=[choice], usage=self._usage())

    def error_body(self, failure: GatewayFailure) -> dict[str, Any]:
        return openai_error_body(failure)

    def error_frame(self, failure: GatewayFailure) -> bytes:
        return _sse(openai_error_body(failure))
