"""The assistant message being streamed, with the indices the fold needs.

Owns: ``MessageState``, the port of the AI SDK's ``createStreamingUIMessageState`` (``ai@6.0.326``,
``src/ui/process-ui-message-stream.ts``) as ``drupe.chunks.accumulate`` uses it: the message and
its parts, the open text and reasoning parts, the partial tool calls, the parts indexed by tool
call id and by data part id, and the step boundary. Also ``AccumulateError`` (where the SDK
throws) and ``clone_json``.

Lazy work lives here: text deltas (``OpenText``) and tool-input deltas (``PendingInput``) are
buffered, and joined (tool input: parsed) only by ``flush_input`` / ``flush_all``.

Must never: mutate the message it is given other than through its methods, or raise after a
mutation (``merged_metadata`` raises before anything changes).
"""

from __future__ import annotations

from typing import Any

from drupe.chunks.metadata import MetadataMergeError, merge_objects
from drupe.chunks.partial_json import UNDEFINED, parse_partial_json
from drupe.chunks.tool_parts import (
    PartialToolCall,
    PendingInput,
    assign,
    coalesce,
    is_tool_part,
    nullish,
    static_tool_name,
    update_tool_part,
)
from drupe.chunks.types import UIPart

__all__ = ["AccumulateError", "MessageState", "OpenText", "clone_json"]


class AccumulateError(ValueError):
    """The chunk sequence is one the AI SDK rejects (its ``UIMessageStreamError``)."""


def clone_json(value: Any) -> Any:
    """Deep copy of a JSON-like value (dicts and lists are copied, everything else shared)."""
    if isinstance(value, dict):
        return {k: clone_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone_json(v) for v in value]
    return value


class OpenText:
    """An open text or reasoning part and the deltas not yet joined into its ``text``."""

    __slots__ = ("part", "pieces")

    def __init__(self, part: UIPart) -> None:
        self.part = part
        self.pieces: list[str] = []

    def flush(self) -> None:
        if self.pieces:
            self.part["text"] = self.part["text"] + "".join(self.pieces)
            self.pieces.clear()


class MessageState:
    """The streaming message state: ``load`` a message, then index, find and update its parts."""

    __slots__ = (
        "active_reasoning",
        "active_text",
        "data_index",
        "message",
        "parts",
        "pending_inputs",
        "step_start",
        "tool_calls",
        "tool_index",
        "unwritten_steps",
        "written",
    )

    def __init__(self, message: dict[str, Any]) -> None:
        self.written = False
        """Whether the SDK would have yielded at least one snapshot."""
        self.load(message)

    def load(self, message: dict[str, Any]) -> None:
        """``createStreamingUIMessageState``: index the parts, reopen streaming tool inputs."""
        self.message = message
        self.parts: list[UIPart] = message["parts"]
        self.active_text: dict[str, OpenText] = {}
        self.active_reasoning: dict[str, OpenText] = {}
        self.tool_calls: dict[str, PartialToolCall] = {}
        self.tool_index: dict[str, list[int]] = {}
        self.data_index: dict[tuple[str, str], int] = {}
        self.pending_inputs: dict[str, PendingInput] = {}
        self.unwritten_steps = 0
        """``step-start`` parts pushed after the last snapshot the SDK yielded."""
        self.step_start = -1
        for index, part in enumerate(self.parts):
            self._index_part(index, part)
        for part in self.parts[self.step_start + 1 :]:
            if not is_tool_part(part) or part.get("state") != "input-streaming":
                continue
            dynamic = part["type"] == "dynamic-tool"
            raw = coalesce(part.get("rawInput", UNDEFINED), "")
            self.tool_calls[part["toolCallId"]] = PartialToolCall(
                text=raw if isinstance(raw, str) else "",
                input_encoding=part.get("inputEncoding", UNDEFINED),
                tool_name=part.get("toolName", UNDEFINED) if dynamic else static_tool_name(part),
                dynamic=dynamic,
                title=part.get("title", UNDEFINED),
                tool_metadata=part.get("toolMetadata", UNDEFINED),
            )

    def _index_part(self, index: int, part: UIPart) -> None:
        part_type = part.get("type")
        if part_type == "step-start":
            self.step_start = index
        elif is_tool_part(part):
            call_id = part.get("toolCallId")
            if isinstance(call_id, str):
                self.tool_index.setdefault(call_id, []).append(index)
        elif isinstance(part_type, str) and part_type.startswith("data-"):
            part_id = part.get("id")
            if isinstance(part_id, str):
                self.data_index.setdefault((part_type, part_id), index)

    def push_part(self, part: UIPart) -> None:
        self.parts.append(part)
        self._index_part(len(self.parts) - 1, part)

    def write(self) -> None:
        """The SDK yields a snapshot here."""
        self.written = True
        self.unwritten_steps = 0

    def visible_parts(self) -> list[UIPart]:
        """The parts as the SDK last yielded them (without unwritten ``step-start`` parts)."""
        parts = self.parts
        if self.unwritten_steps:
            parts = parts[: len(parts) - self.unwritten_steps]
        return parts

    # --- tool parts ---------------------------------------------------------------------------

    def find_in_step(self, call_id: str, kind: str) -> UIPart | None:
        """First tool part of the current step with ``call_id``; kind: static, dynamic, any."""
        for index in self.tool_index.get(call_id, ()):
            if index > self.step_start:
                part = self.parts[index]
                is_dynamic = part["type"] == "dynamic-tool"
                if kind == "any" or (kind == "dynamic") == is_dynamic:
                    return part
        return None

    def tool_invocation(self, call_id: str) -> UIPart:
        """The step's tool part for ``call_id``, else the message's last; raises when none."""
        part = self.find_in_step(call_id, "any")
        if part is None:
            indices = self.tool_index.get(call_id)
            if not indices:
                raise AccumulateError(f'No tool invocation found for tool call ID "{call_id}".')
            part = self.parts[indices[-1]]
        return part

    def update_tool(
        self, dynamic: bool, options: dict[str, Any], existing: UIPart | None = None
    ) -> tuple[UIPart, bool]:
        """Update the tool part (``existing`` or the step's part for the call) or push a new one
        (``updateToolPart`` / ``updateDynamicToolPart``); returns it and whether it existed."""
        part = existing
        if part is None:
            part = self.find_in_step(options["toolCallId"], "dynamic" if dynamic else "static")
        updated = update_tool_part(part, dynamic, options)
        if part is None:
            self.push_part(updated)
        return updated, part is not None

    # --- lazy text and tool input -------------------------------------------------------------

    def flush_input(self, call_id: str) -> None:
        """Join (and parse) the buffered input deltas of ``call_id`` into its part."""
        pending = self.pending_inputs.pop(call_id, None)
        if pending is None:
            return
        text = pending.call.text()
        if pending.call.input_encoding == "text":
            assign(pending.part, "input", text)
        else:
            assign(pending.part, "input", parse_partial_json(text))
        if pending.with_raw:
            pending.part["rawInput"] = text

    def flush_all(self) -> None:
        """Join every buffered text, reasoning and tool-input delta."""
        for open_text in self.active_text.values():
            open_text.flush()
        for open_text in self.active_reasoning.values():
            open_text.flush()
        for call_id in list(self.pending_inputs):
            self.flush_input(call_id)

    # --- metadata -----------------------------------------------------------------------------

    @staticmethod
    def merged_metadata(current: Any, metadata: Any) -> Any:
        """The new ``metadata`` (``UNDEFINED`` when unchanged); raises before any mutation."""
        if nullish(metadata):
            return UNDEFINED
        if nullish(current):
            return metadata
        try:
            return merge_objects(current, metadata)
        except MetadataMergeError as exc:
            raise AccumulateError(str(exc)) from None

    def apply_metadata(self, metadata: Any) -> bool:
        """Merge ``metadata`` into the message's; whether it changed anything."""
        merged = self.merged_metadata(self.message.get("metadata", UNDEFINED), metadata)
        if merged is UNDEFINED:
            return False
        self.message["metadata"] = merged
        return True
