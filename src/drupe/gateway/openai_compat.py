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
declared are written back as ``tool_calls``. Pure: no I/O.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from drupe.agent.models.registry import ModelInfo
from drupe.chunks.types import Chunk, UIMessage, UIPart
from drupe.gateway.prompt import GatewayFailure, PromptSpec, client_tool
from drupe.gateway.request_values import sampling_settings, tool_call_part

__all__ = [
    "OpenAIChat",
    "OpenAIDialect",
    "model_object",
    "models_body",
    "openai_error_body",
    "parse_chat_request",
]

Fail = Callable[[str], Exception]

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


# --- request -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenAIChat:
    """A parsed chat-completions request."""

    spec: PromptSpec
    model: str
    stream: bool
    include_usage: bool
    declared_tools: frozenset[str]


def parse_chat_request(body: Any, fail: Fail) -> OpenAIChat:
    """Validate a request body; ``fail(message)`` builds the 400 error to raise."""
    if not isinstance(body, dict):
        raise fail("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise fail("'model' is required: a 'provider:model' id from GET /v1/models")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise fail("'messages' must be a non-empty array")
    if body.get("n") not in (None, 1):
        raise fail("only n=1 is supported")
    tools = _tools(body.get("tools"), fail)
    if body.get("tool_choice") == "none":
        tools = []
    stream_options = body.get("stream_options")
    include_usage = isinstance(stream_options, dict) and bool(stream_options.get("include_usage"))
    spec = PromptSpec(
        model_id=model,
        messages=_ui_messages(messages, fail),
        tools=tools,
        model_settings=_settings(body, fail),
    )
    return OpenAIChat(
        spec=spec,
        model=model,
        stream=body.get("stream") is True,
        include_usage=include_usage,
        declared_tools=frozenset(t.name for t in tools),
    )


def _settings(body: Mapping[str, Any], fail: Fail) -> dict[str, Any] | None:
    settings = sampling_settings(
        body,
        fail,
        max_tokens=("max_completion_tokens", "max_tokens"),
        numbers=("temperature", "top_p", "presence_penalty", "frequency_penalty"),
    )
    seed = body.get("seed")
    if seed is not None:
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise fail("'seed' must be an integer")
        settings["seed"] = seed
    stop = body.get("stop")
    if isinstance(stop, str):
        settings["stop_sequences"] = [stop]
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        settings["stop_sequences"] = list(stop)
    elif stop is not None:
        raise fail("'stop' must be a string or an array of strings")
    if isinstance(body.get("parallel_tool_calls"), bool):
        settings["parallel_tool_calls"] = body["parallel_tool_calls"]
    return settings or None


def _tools(raw: Any, fail: Fail) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise fail("'tools' must be an array")
    entries = []
    for tool in raw:
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or tool.get("type", "function") != "function":
            raise fail("each tool must be {'type': 'function', 'function': {...}}")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise fail("each function tool needs a 'name'")
        schema = function.get("parameters") or {}
        if not isinstance(schema, dict):
            raise fail(f"tool {name!r}: 'parameters' must be a JSON schema object")
        description = function.get("description")
        entries.append(
            client_tool(name, description if isinstance(description, str) else "", schema)
        )
    return entries


def _text_of(content: Any, fail: Fail, role: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for item in content:
            if isinstance(item, dict) and item.get("type") == "text":
                texts.append(str(item.get("text", "")))
            elif isinstance(item, str):
                texts.append(item)
        return "\n\n".join(texts)
    raise fail(f"{role} message content must be a string or an array of parts")


def _user_parts(content: Any, fail: Fail) -> list[UIPart]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise fail("user message content must be a string or an array of parts")
    parts: list[UIPart] = []
    for item in content:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "text":
            parts.append({"type": "text", "text": str(item.get("text", ""))})
        elif kind == "image_url":
            image = item.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str) or not url:
                raise fail("an image_url part needs a url")
            media = url[5 : url.find(";")] if url.startswith("data:") and ";" in url else "image/*"
            parts.append({"type": "file", "mediaType": media, "url": url})
        else:
            raise fail(f"unsupported user content part {kind!r} (text and image_url are)")
    return parts


def _ui_messages(messages: Sequence[Any], fail: Fail) -> list[UIMessage]:
    out: list[UIMessage] = []
    calls: dict[str, UIPart] = {}
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise fail(f"messages[{index}] must be an object")
        role = message.get("role")
        content = message.get("content")
        message_id = f"m{index}"
        if role in ("system", "developer"):
            text = _text_of(content, fail, "system")
            out.append(
                {"id": message_id, "role": "system", "parts": [{"type": "text", "text": text}]}
            )
        elif role == "user":
            out.append({"id": message_id, "role": "user", "parts": _user_parts(content, fail)})
        elif role == "assistant":
            out.append(
                {
                    "id": message_id,
                    "role": "assistant",
                    "parts": _assistant_parts(message, calls, fail),
                }
            )
        elif role == "tool":
            call_id = message.get("tool_call_id")
            part = calls.get(call_id) if isinstance(call_id, str) else None
            if part is None:
                raise fail(
                    f"messages[{index}]: tool_call_id {call_id!r} answers no earlier tool call"
                )
            part["state"] = "output-available"
            part["output"] = _text_of(content, fail, "tool")
        else:
            raise fail(f"messages[{index}]: unsupported role {role!r}")
    return out


def _assistant_parts(
    message: Mapping[str, Any], calls: dict[str, UIPart], fail: Fail
) -> list[UIPart]:
    parts: list[UIPart] = []
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        parts.append({"type": "reasoning", "text": reasoning})
    text = _text_of(message.get("content"), fail, "assistant")
    if text:
        parts.append({"type": "text", "text": text})
    tool_calls = message.get("tool_calls") or []
    if not isinstance(tool_calls, list):
        raise fail("assistant 'tool_calls' must be an array")
    for call in tool_calls:
        function = call.get("function") if isinstance(call, dict) else None
        call_id = call.get("id") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(call_id, str) or not call_id:
            raise fail("each assistant tool call needs an 'id' and a 'function'")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise fail(f"tool call {call_id!r} needs a function name")
        try:
            part = tool_call_part(
                call_id,
                name,
                function.get("arguments"),
                bad_json=f"tool call {call_id!r}: arguments are not valid JSON",
            )
        except ValueError as err:
            raise fail(str(err)) from None
        calls[call_id] = part
        parts.append(part)
    return parts


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
