"""The OpenAI chat-completions request: a ``POST /v1/chat/completions`` body -> ``OpenAIChat``.

Contract: ``parse_chat_request(body, fail)`` validates the body and returns the parsed request
(the ``PromptSpec`` for the agent loop, the model id, ``stream``, ``stream_options.include_usage``
and the names of the tools the client declared), or raises ``fail(message)`` (the caller's 400)
naming the first bad field. Mapping: ``system``/``developer`` messages become UI ``system``
messages; ``user`` content (text, ``image_url``) becomes text and file parts; an ``assistant``
message becomes one UI assistant message (reasoning, text, one ``dynamic-tool`` part per
``tool_calls`` entry) and the following ``tool`` messages fill those parts' outputs. Sampling
settings and client tools are checked here. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from drupe.chunks.types import UIMessage, UIPart
from drupe.gateway.prompt import PromptSpec, client_tool
from drupe.gateway.request_values import sampling_settings, tool_call_part

__all__ = ["Fail", "OpenAIChat", "parse_chat_request"]

Fail = Callable[[str], Exception]


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
