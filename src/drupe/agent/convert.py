"""Conversions between AI SDK UI messages / chunks and pydantic-ai messages / stream events.

Two directions, both pure:

- ``to_model_messages``: UI message history -> pydantic-ai ``ModelRequest`` / ``ModelResponse``
  list. User text and files become a ``UserPromptPart``; an assistant message is split at its
  ``step-start`` parts, each step becoming one ``ModelResponse`` (text, reasoning, tool calls)
  followed by one ``ModelRequest`` with the tool returns it has (output, error, denial).
  ``data-*``, ``source-*`` and ``step-start`` parts are not sent. A thinking part's signature,
  id and provider travel in the reasoning part's ``providerMetadata["drupe"]`` so a provider
  that checks them (Anthropic extended thinking) accepts the history back. A tool call without a
  result is answered with an ``interrupted`` return, except for the decided or pending approvals
  in the open tail of an approval continuation (``open_tail=True``), which the loop answers.
  With ``wrap_last_user_as_steer`` the model-facing copy of the last user message's text is
  wrapped in a steer system reminder; the UI dicts are never mutated.
- ``StepChunker``: pydantic-ai stream events of one model request -> UI chunks
  (``text-*``, ``reasoning-*``, ``tool-input-*``). It never emits step, tool output or lifecycle
  chunks; the loop owns those.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_ai.messages import (
    AudioUrl,
    BinaryContent,
    DocumentUrl,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    ModelResponseStreamEvent,
    NativeToolCallPart,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    SystemPromptPart,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPart,
    ToolCallPartDelta,
    ToolReturnPart,
    UserContent,
    UserPromptPart,
    VideoUrl,
)

from drupe.chunks.types import Chunk, UIMessage, UIPart

__all__ = [
    "PROVIDER_METADATA_KEY",
    "STEER_REMINDER",
    "ParsedToolCall",
    "StepChunker",
    "denied_return",
    "steer_wrap",
    "to_model_messages",
    "tool_name_of",
    "ui_finish_reason",
]

PROVIDER_METADATA_KEY = "drupe"
"""Key of Drupe's own entry in a part's ``providerMetadata`` (thinking signatures round-trip)."""

STEER_REMINDER = (
    "<system-reminder>\n"
    "The user sent the following message while you were working on the previous request:\n"
    "{text}\n\n"
    "Address this message and continue with your tasks.\n"
    "</system-reminder>"
)

_FINISH_REASONS: Mapping[str, str] = {
    "stop": "stop",
    "length": "length",
    "content_filter": "content-filter",
    "tool_call": "tool-calls",
    "error": "error",
}


def steer_wrap(text: str) -> str:
    """Return the model-facing form of a steer message."""
    return STEER_REMINDER.format(text=text)


def ui_finish_reason(reason: str | None, *, has_tool_calls: bool) -> str:
    """Map a pydantic-ai finish reason to the UI stream's (``tool_call`` -> ``tool-calls``)."""
    if reason is None:
        return "tool-calls" if has_tool_calls else "stop"
    return _FINISH_REASONS.get(reason, "other")


def tool_name_of(part: UIPart) -> str | None:
    """Return the tool name of a ``tool-<name>`` or ``dynamic-tool`` part, else ``None``."""
    part_type = str(part.get("type", ""))
    if part_type == "dynamic-tool":
        name = part.get("toolName")
        return str(name) if name is not None else None
    if part_type.startswith("tool-"):
        return part_type[5:]
    return None


def denied_return(tool_name: str, tool_call_id: str, reason: str | None) -> ToolReturnPart:
    """Return what the model sees for a call a human denied."""
    text = "The user denied this tool call."
    if reason:
        text += f" Reason: {reason}"
    return ToolReturnPart(
        tool_name=tool_name, content=text, tool_call_id=tool_call_id, outcome="denied"
    )


def to_model_messages(
    messages: Sequence[UIMessage],
    *,
    wrap_last_user_as_steer: bool = False,
    open_tail: bool = False,
) -> list[ModelMessage]:
    """Convert UI history (root first) to the pydantic-ai message list the model is sent."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    out: list[ModelMessage] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        parts = message.get("parts") or []
        if role == "user":
            steer = wrap_last_user_as_steer and index == last_user
            prompt = _user_prompt(parts, steer=steer)
            if prompt is not None:
                out.append(ModelRequest(parts=[prompt]))
        elif role == "system":
            text = _joined_text(parts)
            if text:
                out.append(ModelRequest(parts=[SystemPromptPart(content=text)]))
        elif role == "assistant":
            is_tail = open_tail and index == len(messages) - 1
            out.extend(_assistant_messages(parts, open_tail=is_tail))
    return out


# --- user --------------------------------------------------------------------------------------


def _user_prompt(parts: Sequence[UIPart], *, steer: bool) -> UserPromptPart | None:
    texts = [str(p.get("text", "")) for p in parts if p.get("type") == "text"]
    files = [content for p in parts if p.get("type") == "file" for content in _file_content(p)]
    text = "\n\n".join(t for t in texts if t)
    if steer and text:
        text = steer_wrap(text)
    if not files:
        return UserPromptPart(content=text) if text else None
    content: list[UserContent] = [text] if text else []
    content.extend(files)
    return UserPromptPart(content=content)


def _file_content(part: UIPart) -> list[UserContent]:
    url = str(part.get("url", ""))
    media_type = str(part.get("mediaType") or "application/octet-stream")
    if not url:
        return []
    if url.startswith("data:"):
        try:
            return [BinaryContent.from_data_uri(url)]
        except ValueError:
            return []
    if media_type.startswith("image/"):
        return [ImageUrl(url=url, media_type=media_type)]
    if media_type.startswith("audio/"):
        return [AudioUrl(url=url, media_type=media_type)]
    if media_type.startswith("video/"):
        return [VideoUrl(url=url, media_type=media_type)]
    return [DocumentUrl(url=url, media_type=media_type)]


def _joined_text(parts: Sequence[UIPart]) -> str:
    return "\n\n".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")


# --- assistant ---------------------------------------------------------------------------------


def _assistant_messages(parts: Sequence[UIPart], *, open_tail: bool) -> list[ModelMessage]:
    blocks: list[list[UIPart]] = [[]]
    for part in parts:
        if part.get("type") == "step-start":
            if blocks[-1]:
                blocks.append([])
            continue
        blocks[-1].append(part)
    out: list[ModelMessage] = []
    for number, block in enumerate(blocks):
        last_block = number == len(blocks) - 1
        out.extend(_assistant_block(block, leave_open=open_tail and last_block))
    return out


def _assistant_block(block: Sequence[UIPart], *, leave_open: bool) -> list[ModelMessage]:
    response_parts: list[ModelResponsePart] = []
    returns: list[ModelRequestPart] = []
    for part in block:
        part_type = part.get("type")
        if part_type == "text":
            text = str(part.get("text", ""))
            if text:
                response_parts.append(TextPart(content=text))
        elif part_type == "reasoning":
            thinking = _thinking_part(part)
            if thinking is not None:
                response_parts.append(thinking)
        elif (name := tool_name_of(part)) is not None:
            state = part.get("state")
            call_id = str(part.get("toolCallId", ""))
            if state == "input-streaming" or not call_id:
                continue  # never completed: the model never saw a usable call
            if part.get("providerExecuted"):
                continue  # provider-side tools are not replayed
            tool_input = part.get("input")
            args = tool_input if isinstance(tool_input, dict) else {}
            response_parts.append(ToolCallPart(tool_name=name, args=args, tool_call_id=call_id))
            returned = _tool_return(part, name, call_id, leave_open=leave_open)
            if returned is not None:
                returns.append(returned)
    out: list[ModelMessage] = []
    if response_parts:
        out.append(ModelResponse(parts=response_parts))
    if returns:
        out.append(ModelRequest(parts=returns))
    return out


def _tool_return(
    part: UIPart, name: str, call_id: str, *, leave_open: bool
) -> ToolReturnPart | None:
    state = part.get("state")
    if state == "output-available":
        return ToolReturnPart(tool_name=name, content=part.get("output"), tool_call_id=call_id)
    if state == "output-error":
        return ToolReturnPart(
            tool_name=name,
            content=str(part.get("errorText", "tool failed")),
            tool_call_id=call_id,
            outcome="failed",
        )
    if state == "output-denied":
        approval = part.get("approval") or {}
        return denied_return(name, call_id, approval.get("reason"))
    if leave_open and state in ("approval-requested", "approval-responded"):
        return None  # the continuation answers it
    return ToolReturnPart(
        tool_name=name,
        content="The tool call was interrupted before it returned a result.",
        tool_call_id=call_id,
        outcome="interrupted",
    )


def _thinking_part(part: UIPart) -> ThinkingPart | None:
    text = str(part.get("text", ""))
    metadata = part.get("providerMetadata") or {}
    carried = metadata.get(PROVIDER_METADATA_KEY) if isinstance(metadata, dict) else None
    if not isinstance(carried, dict):
        carried = {}
    signature = carried.get("signature")
    if not text and not signature:
        return None
    return ThinkingPart(
        content=text,
        id=carried.get("id"),
        signature=signature,
        provider_name=carried.get("providerName"),
    )


def _thinking_metadata(part: ThinkingPart) -> dict[str, str]:
    """What a provider needs to accept its thinking back: signature, id, provider name."""
    carried = {"signature": part.signature, "id": part.id, "providerName": part.provider_name}
    return {key: value for key, value in carried.items() if value}


# --- stream events -> chunks ---------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedToolCall:
    """A function tool call of the step, after its input was parsed."""

    call_id: str
    tool_name: str
    input: dict[str, Any] | None
    """Parsed arguments, or ``None`` when they were invalid or the tool is unknown."""
    error: str | None = None


class StepChunker:
    """Map one model request's stream events to UI chunks (stateful, one per step)."""

    def __init__(self, *, known_tools: Collection[str], new_id: Callable[[], str]) -> None:
        self._known = known_tools
        self._new_id = new_id
        self._open: dict[int, tuple[Literal["text", "reasoning", "tool"], str]] = {}
        self._calls: dict[str, ParsedToolCall] = {}

    @property
    def tool_calls(self) -> list[ParsedToolCall]:
        """Function tool calls seen so far, in the order they ended."""
        return list(self._calls.values())

    def feed(self, event: ModelResponseStreamEvent) -> list[Chunk]:
        """Return the chunks for ``event`` (possibly none)."""
        if isinstance(event, PartStartEvent):
            return self._start(event.index, event.part)
        if isinstance(event, PartDeltaEvent):
            return self._delta(event.index, event.delta)
        if isinstance(event, PartEndEvent):
            return self._end(event.index, event.part)
        return []

    def finish(self, response: ModelResponse) -> list[Chunk]:
        """Close whatever is still open and account for calls the stream never ended."""
        chunks: list[Chunk] = []
        for index, part in enumerate(response.parts):
            if index in self._open:
                chunks.extend(self._end(index, part))
        for part in response.parts:
            if (
                isinstance(part, ToolCallPart)
                and _is_function_call(part)
                and part.tool_call_id not in self._calls
            ):
                chunks.append(_tool_input_start(part))
                chunks.append(self._parse(part))
        self._open.clear()
        return chunks

    def _start(self, index: int, part: ModelResponsePart) -> list[Chunk]:
        if isinstance(part, TextPart):
            part_id = self._new_id()
            self._open[index] = ("text", part_id)
            chunks: list[Chunk] = [{"type": "text-start", "id": part_id}]
            if part.content:
                chunks.append({"type": "text-delta", "id": part_id, "delta": part.content})
            return chunks
        if isinstance(part, ThinkingPart):
            part_id = self._new_id()
            self._open[index] = ("reasoning", part_id)
            chunks = [{"type": "reasoning-start", "id": part_id}]
            if part.content:
                chunks.append({"type": "reasoning-delta", "id": part_id, "delta": part.content})
            return chunks
        if _is_function_call(part):
            assert isinstance(part, ToolCallPart)
            self._open[index] = ("tool", part.tool_call_id)
            chunks = [_tool_input_start(part)]
            initial = _args_text(part.args)
            if initial:
                chunks.append(
                    {
                        "type": "tool-input-delta",
                        "toolCallId": part.tool_call_id,
                        "inputTextDelta": initial,
                    }
                )
            return chunks
        return []

    def _delta(self, index: int, delta: Any) -> list[Chunk]:
        opened = self._open.get(index)
        if opened is None:
            return []
        kind, part_id = opened
        if kind == "text" and isinstance(delta, TextPartDelta) and delta.content_delta:
            return [{"type": "text-delta", "id": part_id, "delta": delta.content_delta}]
        if kind == "reasoning" and isinstance(delta, ThinkingPartDelta) and delta.content_delta:
            return [{"type": "reasoning-delta", "id": part_id, "delta": delta.content_delta}]
        if (
            kind == "tool"
            and isinstance(delta, ToolCallPartDelta)
            and isinstance(delta.args_delta, str)
            and delta.args_delta
        ):
            return [
                {
                    "type": "tool-input-delta",
                    "toolCallId": part_id,
                    "inputTextDelta": delta.args_delta,
                }
            ]
        return []

    def _end(self, index: int, part: ModelResponsePart) -> list[Chunk]:
        opened = self._open.pop(index, None)
        if opened is None:
            return []
        kind, part_id = opened
        if kind == "text":
            return [{"type": "text-end", "id": part_id}]
        if kind == "reasoning":
            chunk: Chunk = {"type": "reasoning-end", "id": part_id}
            if isinstance(part, ThinkingPart) and (metadata := _thinking_metadata(part)):
                chunk["providerMetadata"] = {PROVIDER_METADATA_KEY: metadata}
            return [chunk]
        if isinstance(part, ToolCallPart):
            return [self._parse(part)]
        return []

    def _parse(self, part: ToolCallPart) -> Chunk:
        call_id, name = part.tool_call_id, part.tool_name
        error: str | None = None
        parsed: dict[str, Any] | None = None
        raw: Any = part.args
        try:
            parsed = part.args_as_dict(raise_if_invalid=True)
            raw = parsed
        except (ValueError, AssertionError):
            error = f"Invalid JSON arguments for tool {name!r}."
        if error is None and name not in self._known:
            error = f"Model tried to call unavailable tool {name!r}."
        if error is not None:
            self._calls[call_id] = ParsedToolCall(
                call_id=call_id, tool_name=name, input=None, error=error
            )
            return {
                "type": "tool-input-error",
                "toolCallId": call_id,
                "toolName": name,
                "input": raw,
                "errorText": error,
            }
        self._calls[call_id] = ParsedToolCall(call_id=call_id, tool_name=name, input=parsed)
        return {
            "type": "tool-input-available",
            "toolCallId": call_id,
            "toolName": name,
            "input": parsed,
        }


def _is_function_call(part: ModelResponsePart) -> bool:
    return isinstance(part, ToolCallPart) and not isinstance(part, NativeToolCallPart)


def _tool_input_start(part: ToolCallPart) -> Chunk:
    return {"type": "tool-input-start", "toolCallId": part.tool_call_id, "toolName": part.tool_name}


def _args_text(args: Any) -> str:
    if args is None:
        return ""
    if isinstance(args, str):
        return args
    return json.dumps(args, separators=(",", ":"))
