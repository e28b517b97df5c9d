"""``StepChunker``: pydantic-ai stream events of one model request -> AI SDK UI chunks.

Owns the mapping of ``PartStartEvent`` / ``PartDeltaEvent`` / ``PartEndEvent`` to ``text-*``,
``reasoning-*`` and ``tool-input-*`` chunks, the parsing of tool-call arguments
(``tool-input-available`` or ``tool-input-error`` for invalid JSON and unknown tools), and the
finish-reason vocabulary. Pure and synchronous; one chunker per step.

Must never emit step, tool output, approval or lifecycle chunks: the loop owns those. A thinking
part's signature, id and provider name ride on ``reasoning-end`` as
``providerMetadata["drupe"]`` so ``drupe.agent.convert`` can hand them back to the provider.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_ai.messages import (
    ModelResponse,
    ModelResponsePart,
    ModelResponseStreamEvent,
    NativeToolCallPart,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPart,
    ToolCallPartDelta,
)

from drupe.chunks.types import PROVIDER_METADATA_KEY, Chunk

__all__ = [
    "PROVIDER_METADATA_KEY",
    "ParsedToolCall",
    "StepChunker",
    "strip_markers",
    "ui_finish_reason",
]

# Invisible boundary markers some models emit next to tool calls (U+2050-U+2057, U+2063): they
# carry no text and would otherwise reach the screen and the stored message (reference §3.1).
_MARKERS = str.maketrans("", "", "".join(chr(c) for c in range(0x2050, 0x2058)) + "\u2063")


def strip_markers(text: str) -> str:
    """``text`` without the invisible tool-boundary marker characters."""
    return text.translate(_MARKERS) if not text.isascii() else text


_FINISH_REASONS: Mapping[str, str] = {
    "stop": "stop",
    "length": "length",
    "content_filter": "content-filter",
    "tool_call": "tool-calls",
    "error": "error",
}


def ui_finish_reason(reason: str | None, *, has_tool_calls: bool) -> str:
    """Map a pydantic-ai finish reason to the UI stream's (``tool_call`` -> ``tool-calls``)."""
    if reason is None:
        return "tool-calls" if has_tool_calls else "stop"
    return _FINISH_REASONS.get(reason, "other")


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
        chunks = self._close(index)  # a part replaced at the same index: end the old one
        if isinstance(part, TextPart):
            return chunks + self._open_text("text", index, part.content)
        if isinstance(part, ThinkingPart):
            return chunks + self._open_text("reasoning", index, part.content)
        if _is_function_call(part):
            assert isinstance(part, ToolCallPart)
            self._open[index] = ("tool", part.tool_call_id)
            chunks.append(_tool_input_start(part))
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
        return chunks

    def _open_text(
        self, kind: Literal["text", "reasoning"], index: int, content: str | None
    ) -> list[Chunk]:
        part_id = self._new_id()
        self._open[index] = (kind, part_id)
        chunks: list[Chunk] = [{"type": f"{kind}-start", "id": part_id}]
        if content and kind == "text":
            content = strip_markers(content)
        if content:
            chunks.append({"type": f"{kind}-delta", "id": part_id, "delta": content})
        return chunks

    def _close(self, index: int) -> list[Chunk]:
        opened = self._open.pop(index, None)
        if opened is None or opened[0] == "tool":
            return []  # a replaced tool call is dropped; the response's parts decide in finish
        return [{"type": f"{opened[0]}-end", "id": opened[1]}]

    def _delta(self, index: int, delta: Any) -> list[Chunk]:
        opened = self._open.get(index)
        if opened is None:
            # a late delta to a part that already ended: stream it as a new UI part
            if isinstance(delta, TextPartDelta) and delta.content_delta:
                return self._open_text("text", index, delta.content_delta)
            if isinstance(delta, ThinkingPartDelta) and delta.content_delta:
                return self._open_text("reasoning", index, delta.content_delta)
            return []
        kind, part_id = opened
        if kind == "text" and isinstance(delta, TextPartDelta) and delta.content_delta:
            text = strip_markers(delta.content_delta)
            return [{"type": "text-delta", "id": part_id, "delta": text}] if text else []
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


def _thinking_metadata(part: ThinkingPart) -> dict[str, str]:
    """What a provider needs to accept its thinking back: signature, id, provider name."""
    carried = {"signature": part.signature, "id": part.id, "providerName": part.provider_name}
    return {key: value for key, value in carried.items() if value}
