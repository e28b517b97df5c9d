"""One model message's content blocks -> UI chunks (pure; part of the Claude Code translation).

``StepChunker`` owns the open content blocks of the current top-level model message and the
turn's tool-call bookkeeping: ``text`` blocks -> ``text-start/delta/end``, ``thinking`` ->
``reasoning-start/delta/end``, ``tool_use`` (and ``server_tool_use``, provider-executed) ->
``tool-input-start``, ``tool-input-delta`` per JSON slice and ``tool-input-available`` at the
block's stop (the input the CLI parsed, from its ``AssistantMessage``, else the streamed JSON).
A model message is one UI step: ``start-step`` ... ``finish-step``. Part ids are unique for the
connection's life (``text-1``, ``reasoning-2``, ...); tool parts use the model's call id.

Must never: do I/O, or emit a delta for a block it did not start.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from drupe.chunks.types import Chunk

__all__ = ["StepChunker"]


@dataclass(slots=True)
class _Block:
    kind: Literal["text", "reasoning", "tool"]
    id: str
    tool_name: str = ""
    json_text: str = ""


@dataclass(slots=True)
class StepChunker:
    """Open blocks of the current model message, and the turn's tool calls."""

    tool_inputs: dict[str, Any] = field(default_factory=dict)
    """Inputs of the turn's tool calls by id (the CLI's parse wins over the streamed JSON)."""
    available: set[str] = field(default_factory=set)
    """Tool calls whose ``tool-input-available`` chunk was emitted this turn."""
    step_open: bool = False
    _open: dict[int, _Block] = field(default_factory=dict)
    _ids: int = 0

    def begin_turn(self) -> None:
        self.tool_inputs.clear()
        self.available.clear()
        self._open.clear()
        self.step_open = False

    def _next_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}-{self._ids}"

    def open_step(self) -> list[Chunk]:
        self.step_open = True
        return [{"type": "start-step"}]

    def block_start(self, index: int, block: Mapping[str, Any]) -> list[Chunk]:
        if not self.step_open:
            self.step_open = True
            head: list[Chunk] = [{"type": "start-step"}]
        else:
            head = []
        btype = block.get("type")
        if btype == "text":
            b = self._open[index] = _Block("text", self._next_id("text"))
            out = [{"type": "text-start", "id": b.id}]
            if block.get("text"):
                out += [{"type": "text-delta", "id": b.id, "delta": block["text"]}]
            return head + out
        if btype in ("thinking", "redacted_thinking"):
            b = self._open[index] = _Block("reasoning", self._next_id("reasoning"))
            return [*head, {"type": "reasoning-start", "id": b.id}]
        if btype in ("tool_use", "server_tool_use"):
            call_id = str(block.get("id") or self._next_id("call"))
            name = str(block.get("name") or "tool")
            self._open[index] = _Block("tool", call_id, tool_name=name)
            start: Chunk = {"type": "tool-input-start", "toolCallId": call_id, "toolName": name}
            if btype == "server_tool_use":
                start["providerExecuted"] = True
            return [*head, start]
        return head

    def block_delta(self, index: int, delta: Mapping[str, Any]) -> list[Chunk]:
        b = self._open.get(index)
        if b is None:
            return []
        dtype = delta.get("type")
        if dtype == "text_delta" and b.kind == "text":
            return [{"type": "text-delta", "id": b.id, "delta": delta.get("text", "")}]
        if dtype == "thinking_delta" and b.kind == "reasoning":
            text = delta.get("thinking", "")
            return [{"type": "reasoning-delta", "id": b.id, "delta": text}]
        if dtype == "input_json_delta" and b.kind == "tool":
            piece = str(delta.get("partial_json", ""))
            b.json_text += piece
            if not piece:
                return []
            return [{"type": "tool-input-delta", "toolCallId": b.id, "inputTextDelta": piece}]
        return []

    def block_stop(self, index: int) -> list[Chunk]:
        b = self._open.pop(index, None)
        if b is None:
            return []
        if b.kind == "text":
            return [{"type": "text-end", "id": b.id}]
        if b.kind == "reasoning":
            return [{"type": "reasoning-end", "id": b.id}]
        tool_input = self.tool_inputs.get(b.id)
        if tool_input is None:
            try:
                tool_input = json.loads(b.json_text) if b.json_text else {}
            except ValueError:
                tool_input = {}
            self.tool_inputs[b.id] = tool_input
        self.available.add(b.id)
        available: Chunk = {
            "type": "tool-input-available",
            "toolCallId": b.id,
            "toolName": b.tool_name,
            "input": tool_input,
        }
        return [available]

    def close_step(self) -> list[Chunk]:
        out: list[Chunk] = []
        for index in sorted(self._open):
            out += self.block_stop(index)
        if self.step_open:
            self.step_open = False
            out += [{"type": "finish-step"}]
        return out
