"""The OpenAI Responses API request: body -> ``ResponsesRequest`` (a ``PromptSpec`` and options).

Owns validating a ``POST /v1/responses`` body and mapping its input items to the agent loop's
UI messages. Accepted input: a string (one user message) or an array of items:

* messages (``type: "message"`` or a bare ``{role, content}``), roles ``user``, ``system``,
  ``developer``, ``assistant``; content a string or parts ``input_text``, ``output_text``,
  ``input_image`` (an ``image_url``, data URLs included), ``refusal``;
* ``function_call`` (``call_id``, ``name``, ``arguments``) and ``function_call_output``
  (``call_id``, ``output``), which fill one ``dynamic-tool`` part of an assistant message;
* ``reasoning`` (its ``content`` or ``summary`` text becomes a reasoning part).

Consecutive assistant-side items (assistant messages, function calls, reasoning) form ONE UI
assistant message, the way a model step produced them. Anything else (files, item references,
hosted tools, ``background``, structured-output formats) is refused with a 400 that names it.

``instructions`` become a leading system message and are NOT carried along a
``previous_response_id`` chain (as in the OpenAI API); the route prepends the stored chain's
items to ``items`` itself. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from drupe.chunks.types import UIMessage, UIPart
from drupe.gateway.prompt import PromptSpec, client_tool
from drupe.gateway.request_values import sampling_settings, tool_call_part
from drupe.tools.base import ToolEntry

__all__ = ["ResponsesRequest", "parse_responses_request", "ui_messages"]

Fail = Callable[[str], Exception]

_ROLES = ("user", "system", "developer", "assistant")
_ASSISTANT_SIDE = ("function_call", "reasoning")


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponsesRequest:
    """A parsed Responses API request (before a ``previous_response_id`` chain is applied)."""

    model: str
    items: list[dict[str, Any]]
    """This request's input items, normalized (a string input is one user message)."""
    instructions: str | None
    tools: list[ToolEntry]
    tool_specs: list[dict[str, Any]]
    """The function tools as the request declared them (echoed in the response)."""
    tool_choice: str | dict[str, Any]
    model_settings: dict[str, Any] | None
    stream: bool
    store: bool
    previous_response_id: str | None
    metadata: dict[str, str] | None
    temperature: float | None
    max_output_tokens: int | None
    parallel_tool_calls: bool

    @property
    def declared_tools(self) -> frozenset[str]:
        return frozenset(tool.name for tool in self.tools)

    def spec(self, model_id: str, history: Sequence[dict[str, Any]], fail: Fail) -> PromptSpec:
        """The prompt: ``history`` (a stored chain's items) then this request's items."""
        messages: list[UIMessage] = []
        if self.instructions:
            messages.append(
                {
                    "id": "instructions",
                    "role": "system",
                    "parts": [{"type": "text", "text": self.instructions}],
                }
            )
        messages.extend(ui_messages([*history, *self.items], fail))
        if not any(message["role"] != "system" for message in messages):
            raise fail("'input' must hold at least one user or assistant item")
        return PromptSpec(
            model_id=model_id,
            messages=messages,
            tools=self.tools,
            model_settings=self.model_settings,
        )


def parse_responses_request(body: Any, fail: Fail) -> ResponsesRequest:
    """Validate a request body; ``fail(message)`` builds the 400 error to raise."""
    if not isinstance(body, dict):
        raise fail("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise fail("'model' is required: a 'provider:model' id from GET /v1/models")
    for unsupported in ("background", "conversation", "prompt"):
        if body.get(unsupported):
            raise fail(f"{unsupported!r} is not supported by this gateway")
    text = body.get("text")
    text_format = text.get("format") if isinstance(text, dict) else None
    if isinstance(text_format, dict) and text_format.get("type", "text") != "text":
        raise fail("only the 'text' output format is supported (no structured outputs)")
    items = _items(body.get("input"), fail)
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise fail("'instructions' must be a string")
    tool_specs, tools = _tools(body.get("tools"), fail)
    tool_choice = body.get("tool_choice", "auto")
    settings = _settings(body, fail)
    tools, forced = _apply_tool_choice(tool_choice, tools, fail)
    if forced is not None:
        settings["tool_choice"] = forced
    previous = body.get("previous_response_id")
    if previous is not None and (not isinstance(previous, str) or not previous):
        raise fail("'previous_response_id' must be a response id")
    store = body.get("store", True)
    if not isinstance(store, bool):
        raise fail("'store' must be a boolean")
    parallel = body.get("parallel_tool_calls", True)
    if not isinstance(parallel, bool):
        raise fail("'parallel_tool_calls' must be a boolean")
    return ResponsesRequest(
        model=model,
        items=items,
        instructions=instructions or None,
        tools=tools,
        tool_specs=tool_specs,
        tool_choice=tool_choice,
        model_settings=settings or None,
        stream=body.get("stream") is True,
        store=store,
        previous_response_id=previous,
        metadata=_metadata(body.get("metadata"), fail),
        temperature=settings.get("temperature"),
        max_output_tokens=settings.get("max_tokens"),
        parallel_tool_calls=parallel,
    )


def _items(raw: Any, fail: Fail) -> list[dict[str, Any]]:
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw:
        raise fail("'input' must be a string or a non-empty array of items")
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise fail(f"input[{index}] must be an object")
    return [dict(item) for item in raw]


def _metadata(raw: Any, fail: Fail) -> dict[str, str] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or len(raw) > 16:
        raise fail("'metadata' must be an object of at most 16 string pairs")
    for key, value in raw.items():
        if not isinstance(value, str) or len(key) > 64 or len(value) > 512:
            raise fail("'metadata' values must be strings (keys <= 64, values <= 512 chars)")
    return dict(raw)


def _settings(body: Mapping[str, Any], fail: Fail) -> dict[str, Any]:
    settings = sampling_settings(body, fail, max_tokens=("max_output_tokens",))
    if isinstance(body.get("parallel_tool_calls"), bool):
        settings["parallel_tool_calls"] = body["parallel_tool_calls"]
    return settings


def _tools(raw: Any, fail: Fail) -> tuple[list[dict[str, Any]], list[ToolEntry]]:
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        raise fail("'tools' must be an array")
    specs: list[dict[str, Any]] = []
    entries: list[ToolEntry] = []
    for tool in raw:
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind != "function":
            raise fail(f"only function tools are supported, got {kind!r}")
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise fail("each function tool needs a 'name'")
        schema = tool.get("parameters") or {}
        if not isinstance(schema, dict):
            raise fail(f"tool {name!r}: 'parameters' must be a JSON schema object")
        description = tool.get("description")
        description = description if isinstance(description, str) else ""
        specs.append(
            {
                "type": "function",
                "name": name,
                "description": description or None,
                "parameters": schema,
                "strict": bool(tool.get("strict", False)),
            }
        )
        entries.append(client_tool(name, description, schema))
    return specs, entries


def _apply_tool_choice(
    choice: Any, tools: list[ToolEntry], fail: Fail
) -> tuple[list[ToolEntry], Any]:
    """The tools the model sees and the ``tool_choice`` model setting (None: leave it)."""
    if choice == "none":
        return [], None
    if choice == "auto":
        return tools, None
    if choice == "required":
        if not tools:
            raise fail("tool_choice 'required' needs at least one tool")
        return tools, "required"
    if isinstance(choice, dict) and choice.get("type") == "function":
        name = choice.get("name")
        if name not in {tool.name for tool in tools}:
            raise fail(f"tool_choice names {name!r}, which is not among the declared tools")
        return tools, [name]
    raise fail("'tool_choice' must be 'none', 'auto', 'required' or {type: function, name}")


# --- items -> UI messages ---------------------------------------------------------------------


def ui_messages(items: Sequence[Mapping[str, Any]], fail: Fail) -> list[UIMessage]:
    """Map input items (see the module docstring) to UI messages, oldest first."""
    out: list[UIMessage] = []
    calls: dict[str, UIPart] = {}
    assistant: UIMessage | None = None
    for index, item in enumerate(items):
        kind = item.get("type", "message")
        role = item.get("role")
        if kind in _ASSISTANT_SIDE or (kind == "message" and role == "assistant"):
            if assistant is None:
                assistant = {"id": f"i{index}", "role": "assistant", "parts": []}
                out.append(assistant)
            assistant["parts"].extend(_assistant_parts(item, index, calls, fail))
            continue
        if kind == "function_call_output":
            call_id = item.get("call_id")
            part = calls.get(call_id) if isinstance(call_id, str) else None
            if part is None:
                raise fail(f"input[{index}]: call_id {call_id!r} answers no earlier function_call")
            part["state"] = "output-available"
            part["output"] = _output_text(item.get("output"))
            continue
        if kind != "message":
            raise fail(f"input[{index}]: unsupported item type {kind!r}")
        if role not in _ROLES:
            raise fail(f"input[{index}]: unsupported role {role!r}")
        assistant = None
        parts = _content_parts(item.get("content"), index, fail)
        if role in ("system", "developer"):
            text = "\n\n".join(str(p.get("text", "")) for p in parts if p["type"] == "text")
            out.append(
                {"id": f"i{index}", "role": "system", "parts": [{"type": "text", "text": text}]}
            )
        else:
            out.append({"id": f"i{index}", "role": "user", "parts": parts})
    return out


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n\n".join(str(part.get("text", "")) for part in output if isinstance(part, dict))
    return orjson.dumps(output).decode()


def _content_parts(content: Any, index: int, fail: Fail) -> list[UIPart]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise fail(f"input[{index}]: content must be a string or an array of parts")
    parts: list[UIPart] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text"):
            parts.append({"type": "text", "text": str(part.get("text", ""))})
        elif kind == "refusal":
            parts.append({"type": "text", "text": str(part.get("refusal", ""))})
        elif kind == "input_image":
            url = part.get("image_url")
            if not isinstance(url, str) or not url:
                raise fail(f"input[{index}]: an input_image needs an image_url (file ids are not)")
            media = url[5 : url.find(";")] if url.startswith("data:") and ";" in url else "image/*"
            parts.append({"type": "file", "mediaType": media, "url": url})
        else:
            raise fail(f"input[{index}]: unsupported content part {kind!r}")
    return parts


def _assistant_parts(
    item: Mapping[str, Any], index: int, calls: dict[str, UIPart], fail: Fail
) -> list[UIPart]:
    kind = item.get("type", "message")
    if kind == "message":
        return [p for p in _content_parts(item.get("content"), index, fail) if p.get("text")]
    if kind == "reasoning":
        texts = [
            str(part.get("text", ""))
            for part in (item.get("content") or item.get("summary") or [])
            if isinstance(part, dict)
        ]
        text = "\n\n".join(t for t in texts if t)
        return [{"type": "reasoning", "text": text}] if text else []
    call_id, name = item.get("call_id"), item.get("name")
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
        raise fail(f"input[{index}]: a function_call needs a 'call_id' and a 'name'")
    try:
        part = tool_call_part(
            call_id,
            name,
            item.get("arguments"),
            bad_json=f"input[{index}]: function_call arguments are not valid JSON",
        )
    except ValueError as err:
        raise fail(str(err)) from None
    calls[call_id] = part
    return [part]
