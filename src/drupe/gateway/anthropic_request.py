"""The Anthropic Messages request: a ``POST /v1/messages`` body -> ``AnthropicMessages``.

Contract: ``parse_messages_request(body, fail)`` validates the body and returns the parsed
request (the ``PromptSpec`` for the agent loop, the model id, whether it streams, and the names
of the tools the client declared), or raises ``fail(message)`` (the caller's 400) naming the
first bad field. Mapping: ``system`` (a string or text blocks) becomes a UI ``system`` message;
an assistant message becomes one UI assistant message (``thinking`` with its signature in
``providerMetadata.drupe``, text, ``tool_use`` as ``dynamic-tool`` parts); a user message's
``tool_result`` blocks fill those parts' outputs and its other blocks (text, base64 or URL
images) become a UI user message. Sampling settings and client tools are checked here. Pure:
no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from drupe.chunks.types import PROVIDER_METADATA_KEY, UIMessage, UIPart
from drupe.gateway.prompt import PromptSpec, client_tool
from drupe.gateway.request_values import sampling_settings, tool_call_part

__all__ = ["AnthropicMessages", "Fail", "parse_messages_request"]

Fail = Callable[[str], Exception]


@dataclass(frozen=True, slots=True, kw_only=True)
class AnthropicMessages:
    """A parsed Messages API request."""

    spec: PromptSpec
    model: str
    stream: bool
    declared_tools: frozenset[str]


def parse_messages_request(body: Any, fail: Fail) -> AnthropicMessages:
    """Validate a request body; ``fail(message)`` builds the 400 error to raise."""
    if not isinstance(body, dict):
        raise fail("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise fail("'model' is required: a 'provider:model' id from GET /v1/models")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise fail("'messages' must be a non-empty array")
    tools = _tools(body.get("tools"), fail)
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "none":
        tools = []
    history: list[UIMessage] = []
    system = _system_text(body.get("system"), fail)
    if system:
        history.append(
            {"id": "system", "role": "system", "parts": [{"type": "text", "text": system}]}
        )
    history.extend(_ui_messages(messages, fail))
    spec = PromptSpec(
        model_id=model, messages=history, tools=tools, model_settings=_settings(body, fail)
    )
    return AnthropicMessages(
        spec=spec,
        model=model,
        stream=body.get("stream") is True,
        declared_tools=frozenset(t.name for t in tools),
    )


def _settings(body: Mapping[str, Any], fail: Fail) -> dict[str, Any] | None:
    settings = sampling_settings(body, fail, max_tokens=("max_tokens",))
    stop = body.get("stop_sequences")
    if stop is not None:
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise fail("'stop_sequences' must be an array of strings")
        settings["stop_sequences"] = list(stop)
    return settings or None


def _tools(raw: Any, fail: Fail) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise fail("'tools' must be an array")
    entries = []
    for tool in raw:
        name = tool.get("name") if isinstance(tool, dict) else None
        if not isinstance(name, str) or not name:
            raise fail("each tool needs a 'name'")
        schema = tool.get("input_schema") or {}
        if not isinstance(schema, dict):
            raise fail(f"tool {name!r}: 'input_schema' must be a JSON schema object")
        description = tool.get("description")
        entries.append(
            client_tool(name, description if isinstance(description, str) else "", schema)
        )
    return entries


def _system_text(system: Any, fail: Fail) -> str:
    if system is None or isinstance(system, str):
        return system or ""
    if isinstance(system, list):
        return "\n\n".join(
            str(block.get("text", ""))
            for block in system
            if isinstance(block, dict) and block.get("type") == "text"
        )
    raise fail("'system' must be a string or an array of text blocks")


def _blocks(content: Any, fail: Fail, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list) and all(isinstance(b, dict) for b in content):
        return content
    raise fail(f"{where}: content must be a string or an array of content blocks")


def _image_part(block: Mapping[str, Any], fail: Fail) -> UIPart:
    source = block.get("source")
    if isinstance(source, dict) and source.get("type") == "base64":
        media = str(source.get("media_type") or "image/png")
        return {
            "type": "file",
            "mediaType": media,
            "url": f"data:{media};base64,{source.get('data', '')}",
        }
    if (
        isinstance(source, dict)
        and source.get("type") == "url"
        and isinstance(source.get("url"), str)
    ):
        return {"type": "file", "mediaType": "image/*", "url": source["url"]}
    raise fail("an image block needs a base64 or url source")


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n\n".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def _ui_messages(messages: Sequence[Any], fail: Fail) -> list[UIMessage]:
    out: list[UIMessage] = []
    calls: dict[str, UIPart] = {}
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise fail(f"{where} must be an object")
        role = message.get("role")
        blocks = _blocks(message.get("content"), fail, where)
        if role == "assistant":
            made = [_assistant_part(block, calls, fail, where) for block in blocks]
            assistant: list[UIPart] = [part for part in made if part is not None]
            out.append({"id": f"m{index}", "role": "assistant", "parts": assistant})
        elif role == "user":
            parts = []
            for block in blocks:
                kind = block.get("type")
                if kind == "text":
                    parts.append({"type": "text", "text": str(block.get("text", ""))})
                elif kind == "image":
                    parts.append(_image_part(block, fail))
                elif kind == "tool_result":
                    _fill_result(block, calls, fail, where)
                else:
                    raise fail(f"{where}: unsupported user content block {kind!r}")
            if parts:
                out.append({"id": f"m{index}", "role": "user", "parts": parts})
        else:
            raise fail(f"{where}: role must be 'user' or 'assistant', not {role!r}")
    return out


def _assistant_part(
    block: Mapping[str, Any], calls: dict[str, UIPart], fail: Fail, where: str
) -> UIPart | None:
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": str(block.get("text", ""))}
    if kind == "thinking":
        part: UIPart = {"type": "reasoning", "text": str(block.get("thinking", ""))}
        if signature := block.get("signature"):
            part["providerMetadata"] = {PROVIDER_METADATA_KEY: {"signature": str(signature)}}
        return part
    if kind == "redacted_thinking":
        return None
    if kind == "tool_use":
        call_id, name = block.get("id"), block.get("name")
        if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
            raise fail(f"{where}: a tool_use block needs an 'id' and a 'name'")
        tool_input = block.get("input")
        part = tool_call_part(
            call_id, name, tool_input if isinstance(tool_input, dict) else {}, bad_json=""
        )
        calls[call_id] = part
        return part
    raise fail(f"{where}: unsupported assistant content block {kind!r}")


def _fill_result(
    block: Mapping[str, Any], calls: dict[str, UIPart], fail: Fail, where: str
) -> None:
    call_id = block.get("tool_use_id")
    part = calls.get(call_id) if isinstance(call_id, str) else None
    if part is None:
        raise fail(f"{where}: tool_result {call_id!r} answers no earlier tool_use")
    text = _result_text(block.get("content"))
    if block.get("is_error") is True:
        part["state"] = "output-error"
        part["errorText"] = text or "the tool failed"
    else:
        part["state"] = "output-available"
        part["output"] = text
