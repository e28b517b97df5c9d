"""Fold UI message stream chunks into a UI message: a port of the AI SDK's ``readUIMessageStream``.

Owns: ``Accumulator`` and ``accumulate``, which reproduce ``processUIMessageStream``
(``ai@6.0.326``, ``src/ui/process-ui-message-stream.ts``) as driven by ``readUIMessageStream``
(``resetStateOnMessageIdChange``): the message equals, as JSON, the last snapshot the SDK yields
for the same chunks and seed. Tested against the real package under Node
(``tests/chunks/test_node_crosscheck.py``).

Faithful details worth knowing:

- a seed that is not an ``assistant`` message is replaced by an empty one with its id; a
  ``start`` whose ``messageId`` differs from the current id starts a fresh message;
- the SDK yields a snapshot on every chunk that changes the message except ``start-step``, so
  ``step-start`` parts pushed after the last yielded snapshot are left out of ``snapshot()``;
- ``error``, ``abort`` and ``finish-step`` do not change the message (``finish-step`` closes the
  open text and reasoning ids); ``finish`` only merges metadata;
- where the SDK throws (a delta or end without its start, a tool chunk for an unknown tool call,
  metadata that cannot be merged) ``push`` raises ``AccumulateError`` and changes nothing.

Must never: mutate a chunk or the seed, or do work beyond the size of the chunk in ``push``:
text and tool-input deltas are buffered, and joined (tool input: parsed) only when a snapshot is
taken or another chunk touches the part.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, NoReturn

import orjson

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
    truthy,
    update_tool_part,
)
from drupe.chunks.types import Chunk, UIMessage, UIPart

__all__ = ["AccumulateError", "Accumulator", "accumulate", "clone_json"]

_TOOL_CHUNK_TYPES: Final = frozenset(
    (
        "tool-input-start",
        "tool-input-available",
        "tool-input-error",
        "tool-approval-request",
        "tool-output-denied",
        "tool-output-available",
        "tool-output-error",
    )
)


class AccumulateError(ValueError):
    """The chunk sequence is one the AI SDK rejects (its ``UIMessageStreamError``)."""


def clone_json(value: Any) -> Any:
    """Deep copy of a JSON-like value (dicts and lists are copied, everything else shared)."""
    if isinstance(value, dict):
        return {k: clone_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone_json(v) for v in value]
    return value


class _OpenText:
    """An open text or reasoning part and the deltas not yet joined into its ``text``."""

    __slots__ = ("part", "pieces")

    def __init__(self, part: UIPart) -> None:
        self.part = part
        self.pieces: list[str] = []

    def flush(self) -> None:
        if self.pieces:
            self.part["text"] = self.part["text"] + "".join(self.pieces)
            self.pieces.clear()


class Accumulator:
    """Incremental ``readUIMessageStream``: ``push`` chunks, take ``snapshot()`` at any time."""

    __slots__ = (
        "_active_reasoning",
        "_active_text",
        "_data_index",
        "_message",
        "_parts",
        "_pending_inputs",
        "_step_start",
        "_tool_calls",
        "_tool_index",
        "_unwritten_steps",
        "aborted",
        "error_texts",
        "finish_reason",
        "written",
    )

    def __init__(self, seed: UIMessage | None = None) -> None:
        self.finish_reason: str | None = None
        """The last ``finish`` chunk's ``finishReason`` (state the SDK keeps beside the message)."""
        self.error_texts: list[str] = []
        """``errorText`` of every ``error`` chunk (the SDK hands them to ``onError``)."""
        self.aborted = False
        """Whether an ``abort`` chunk was seen (it does not change the message)."""
        self.written = False
        """Whether the SDK would have yielded at least one snapshot."""
        if seed is not None and seed.get("role") == "assistant":
            message: dict[str, Any] = clone_json(seed)
            self._load(message)
        else:
            seed_id = coalesce(seed.get("id", UNDEFINED), "") if seed is not None else ""
            self._load({"id": seed_id, "role": "assistant", "parts": []})

    # --- state --------------------------------------------------------------------------------

    def _load(self, message: dict[str, Any]) -> None:
        """``createStreamingUIMessageState``: index the parts, reopen streaming tool inputs."""
        self._message = message
        self._parts: list[UIPart] = message["parts"]
        self._active_text: dict[str, _OpenText] = {}
        self._active_reasoning: dict[str, _OpenText] = {}
        self._tool_calls: dict[str, PartialToolCall] = {}
        self._tool_index: dict[str, list[int]] = {}
        self._data_index: dict[tuple[str, str], int] = {}
        self._pending_inputs: dict[str, PendingInput] = {}
        self._unwritten_steps = 0
        self._step_start = -1
        for index, part in enumerate(self._parts):
            self._index_part(index, part)
        for part in self._parts[self._step_start + 1 :]:
            if not is_tool_part(part) or part.get("state") != "input-streaming":
                continue
            dynamic = part["type"] == "dynamic-tool"
            raw = coalesce(part.get("rawInput", UNDEFINED), "")
            self._tool_calls[part["toolCallId"]] = PartialToolCall(
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
            self._step_start = index
        elif is_tool_part(part):
            call_id = part.get("toolCallId")
            if isinstance(call_id, str):
                self._tool_index.setdefault(call_id, []).append(index)
        elif isinstance(part_type, str) and part_type.startswith("data-"):
            part_id = part.get("id")
            if isinstance(part_id, str):
                self._data_index.setdefault((part_type, part_id), index)

    def _push_part(self, part: UIPart) -> None:
        self._parts.append(part)
        self._index_part(len(self._parts) - 1, part)

    def _write(self) -> None:
        self.written = True
        self._unwritten_steps = 0

    def _find_in_step(self, call_id: str, kind: str) -> UIPart | None:
        """First tool part of the current step with ``call_id``; kind: static, dynamic, any."""
        for index in self._tool_index.get(call_id, ()):
            if index > self._step_start:
                part = self._parts[index]
                is_dynamic = part["type"] == "dynamic-tool"
                if kind == "any" or (kind == "dynamic") == is_dynamic:
                    return part
        return None

    def _tool_invocation(self, call_id: str) -> UIPart:
        part = self._find_in_step(call_id, "any")
        if part is None:
            indices = self._tool_index.get(call_id)
            if not indices:
                raise AccumulateError(f'No tool invocation found for tool call ID "{call_id}".')
            part = self._parts[indices[-1]]
        return part

    # --- lazy text and tool input ---------------------------------------------------------

    def _flush_input(self, call_id: str) -> None:
        pending = self._pending_inputs.pop(call_id, None)
        if pending is None:
            return
        text = pending.call.text()
        if pending.call.input_encoding == "text":
            assign(pending.part, "input", text)
        else:
            assign(pending.part, "input", parse_partial_json(text))
        if pending.with_raw:
            pending.part["rawInput"] = text

    def _flush_all(self) -> None:
        for open_text in self._active_text.values():
            open_text.flush()
        for open_text in self._active_reasoning.values():
            open_text.flush()
        for call_id in list(self._pending_inputs):
            self._flush_input(call_id)

    # --- tool parts (updateToolPart / updateDynamicToolPart) ---------------------------------

    def _update_tool(
        self, dynamic: bool, options: dict[str, Any], existing: UIPart | None = None
    ) -> tuple[UIPart, bool]:
        """Update the tool part (``existing`` or the step's part for the call) or push a new one."""
        part = existing
        if part is None:
            part = self._find_in_step(options["toolCallId"], "dynamic" if dynamic else "static")
        updated = update_tool_part(part, dynamic, options)
        if part is None:
            self._push_part(updated)
        return updated, part is not None

    # --- metadata -------------------------------------------------------------------------------

    def _merged_metadata(self, current: Any, metadata: Any) -> Any:
        """The new ``metadata`` (``UNDEFINED`` when unchanged); raises before any mutation."""
        if nullish(metadata):
            return UNDEFINED
        if nullish(current):
            return metadata
        try:
            return merge_objects(current, metadata)
        except MetadataMergeError as exc:
            raise AccumulateError(str(exc)) from None

    def _apply_metadata(self, metadata: Any) -> bool:
        merged = self._merged_metadata(self._message.get("metadata", UNDEFINED), metadata)
        if merged is UNDEFINED:
            return False
        self._message["metadata"] = merged
        return True

    # --- the fold -----------------------------------------------------------------------------

    def push(self, chunk: Chunk) -> None:
        """Apply one chunk. Raises ``AccumulateError`` (changing nothing) where the SDK throws."""
        chunk_type = chunk["type"]
        get = chunk.get

        if chunk_type == "text-delta" or chunk_type == "reasoning-delta":
            active = self._active_text if chunk_type == "text-delta" else self._active_reasoning
            open_text = active.get(chunk["id"])
            if open_text is None:
                self._missing_start(chunk_type, chunk["id"])
            open_text.pieces.append(chunk["delta"])
            metadata = get("providerMetadata")
            if metadata is not None:
                open_text.part["providerMetadata"] = metadata
            self.written = True
            self._unwritten_steps = 0
        elif chunk_type == "tool-input-delta":
            self._tool_input_delta(chunk["toolCallId"], chunk["inputTextDelta"])
        elif chunk_type == "text-start":
            part = {"type": "text", "text": ""}
            assign(part, "providerMetadata", get("providerMetadata", UNDEFINED))
            part["state"] = "streaming"
            self._open(self._active_text, chunk["id"], part)
            self._push_part(part)
            self._write()
        elif chunk_type == "reasoning-start":
            part = {"type": "reasoning"}
            assign(part, "id", get("id", UNDEFINED))
            part["text"] = ""
            assign(part, "providerMetadata", get("providerMetadata", UNDEFINED))
            part["state"] = "streaming"
            self._open(self._active_reasoning, chunk["id"], part)
            self._push_part(part)
            self._write()
        elif chunk_type == "text-end" or chunk_type == "reasoning-end":
            active = self._active_text if chunk_type == "text-end" else self._active_reasoning
            open_text = active.get(chunk["id"])
            if open_text is None:
                self._missing_start(chunk_type, chunk["id"])
            open_text.flush()
            part = open_text.part
            part["state"] = "done"
            metadata = get("providerMetadata")
            if metadata is not None:
                part["providerMetadata"] = metadata
            del active[chunk["id"]]
            self._write()
        elif chunk_type == "file":
            part = {"type": "file"}
            assign(part, "mediaType", get("mediaType", UNDEFINED))
            assign(part, "url", get("url", UNDEFINED))
            if get("providerMetadata") is not None:
                part["providerMetadata"] = chunk["providerMetadata"]
            self._push_part(part)
            self._write()
        elif chunk_type == "source-url" or chunk_type == "source-document":
            keys = (
                ("sourceId", "url", "title", "providerMetadata")
                if chunk_type == "source-url"
                else ("sourceId", "mediaType", "title", "filename", "providerMetadata")
            )
            part = {"type": chunk_type}
            for key in keys:
                assign(part, key, get(key, UNDEFINED))
            self._push_part(part)
            self._write()
        elif chunk_type.startswith("tool-"):
            self._tool_chunk(chunk_type, chunk)
        elif chunk_type == "start-step":
            self._push_part({"type": "step-start"})
            self._unwritten_steps += 1
        elif chunk_type == "finish-step":
            for open_text in (*self._active_text.values(), *self._active_reasoning.values()):
                open_text.flush()
            self._active_text = {}
            self._active_reasoning = {}
        elif chunk_type == "start":
            self._start(chunk)
        elif chunk_type == "finish":
            reason = get("finishReason")
            if reason is not None:
                self.finish_reason = reason
            if self._apply_metadata(get("messageMetadata", UNDEFINED)):
                self._write()
        elif chunk_type == "message-metadata":
            if self._apply_metadata(get("messageMetadata", UNDEFINED)):
                self._write()
        elif chunk_type == "error":
            self.error_texts.append(str(get("errorText")))
        elif chunk_type == "abort":
            self.aborted = True
        elif chunk_type.startswith("data-"):
            self._data_chunk(chunk_type, chunk)

    @staticmethod
    def _open(active: dict[str, _OpenText], part_id: str, part: UIPart) -> None:
        replaced = active.get(part_id)
        if replaced is not None:
            replaced.flush()
        active[part_id] = _OpenText(part)

    def _missing_start(self, chunk_type: str, part_id: str) -> NoReturn:
        kind = chunk_type.partition("-")[0]
        noun = "text part" if kind == "text" else "reasoning part"
        raise AccumulateError(
            f'Received {chunk_type} for missing {noun} with ID "{part_id}". '
            f'Ensure a "{kind}-start" chunk is sent before any "{chunk_type}" chunks.'
        )

    def _start(self, chunk: Chunk) -> None:
        message_id = chunk.get("messageId")
        reset = message_id is not None and message_id != self._message["id"]
        metadata = chunk.get("messageMetadata", UNDEFINED)
        current = UNDEFINED if reset else self._message.get("metadata", UNDEFINED)
        merged = self._merged_metadata(current, metadata)
        if reset:
            self.finish_reason = None
            self._load({"id": message_id, "role": "assistant", "parts": []})
        if message_id is not None:
            self._message["id"] = message_id
        if merged is not UNDEFINED:
            self._message["metadata"] = merged
        if reset or message_id is not None or not nullish(metadata):
            self._write()

    def _data_chunk(self, chunk_type: str, chunk: Chunk) -> None:
        if truthy(chunk.get("transient", UNDEFINED)):
            return
        part_id = chunk.get("id")
        existing: UIPart | None = None
        if isinstance(part_id, str):
            index = self._data_index.get((chunk_type, part_id))
            existing = None if index is None else self._parts[index]
        elif part_id is not None:
            existing = next(
                (
                    p
                    for p in self._parts
                    if p.get("type") == chunk_type
                    and type(p.get("id")) is type(part_id)
                    and p.get("id") == part_id
                ),
                None,
            )
        if existing is not None:
            assign(existing, "data", chunk.get("data", UNDEFINED))
        else:
            self._push_part(dict(chunk))
        self._write()

    def _tool_input_delta(self, call_id: str, delta: str) -> None:
        call = self._tool_calls.get(call_id)
        if call is None:
            raise AccumulateError(
                f'Received tool-input-delta for missing tool call with ID "{call_id}". '
                'Ensure a "tool-input-start" chunk is sent before any "tool-input-delta" chunks.'
            )
        dynamic = truthy(call.dynamic)
        target = self._find_in_step(call_id, "dynamic" if dynamic else "static")
        pending = self._pending_inputs.get(call_id)
        if pending is not None and pending.part is not target:
            self._flush_input(call_id)
        call.pieces.append(delta)
        options = {
            "toolCallId": call_id,
            "toolName": call.tool_name,
            "state": "input-streaming",
            "inputEncoding": call.input_encoding,
            "title": call.title,
            "toolMetadata": call.tool_metadata,
        }
        part, existed = self._update_tool(dynamic, options, target)
        self._pending_inputs[call_id] = PendingInput(part, call, existed or not dynamic)
        self._write()

    def _tool_chunk(self, chunk_type: str, chunk: Chunk) -> None:
        if chunk_type not in _TOOL_CHUNK_TYPES:
            return  # not a chunk type of the ai v6 set: the SDK ignores it
        get = chunk.get
        call_id = chunk["toolCallId"]
        self._flush_input(call_id)
        common = {
            "toolCallId": call_id,
            "providerExecuted": get("providerExecuted", UNDEFINED),
            "providerMetadata": get("providerMetadata", UNDEFINED),
        }
        if chunk_type == "tool-input-start":
            self._tool_calls[call_id] = PartialToolCall(
                text="",
                input_encoding=get("inputEncoding", UNDEFINED),
                tool_name=chunk["toolName"],
                dynamic=get("dynamic", UNDEFINED),
                title=get("title", UNDEFINED),
                tool_metadata=get("toolMetadata", UNDEFINED),
            )
            options = {
                **common,
                "toolName": chunk["toolName"],
                "state": "input-streaming",
                "inputEncoding": get("inputEncoding", UNDEFINED),
                "title": get("title", UNDEFINED),
                "toolMetadata": get("toolMetadata", UNDEFINED),
            }
            self._update_tool(truthy(get("dynamic", UNDEFINED)), options)
        elif chunk_type == "tool-input-available":
            options = {
                **common,
                "toolName": chunk["toolName"],
                "state": "input-available",
                "input": get("input", UNDEFINED),
                "title": get("title", UNDEFINED),
                "toolMetadata": get("toolMetadata", UNDEFINED),
            }
            self._update_tool(truthy(get("dynamic", UNDEFINED)), options)
        elif chunk_type == "tool-input-error":
            existing = self._find_in_step(call_id, "any")
            dynamic = (
                existing["type"] == "dynamic-tool"
                if existing is not None
                else truthy(get("dynamic", UNDEFINED))
            )
            options = {
                **common,
                "toolName": chunk["toolName"],
                "state": "output-error",
                "errorText": get("errorText", UNDEFINED),
                "toolMetadata": get("toolMetadata", UNDEFINED),
            }
            if dynamic:
                options["input"] = get("input", UNDEFINED)
            else:
                options["rawInput"] = get("input", UNDEFINED)
            self._update_tool(dynamic, options)
        elif chunk_type == "tool-approval-request":
            part = self._tool_invocation(call_id)
            part["state"] = "approval-requested"
            approval: dict[str, Any] = {}
            assign(approval, "id", get("approvalId", UNDEFINED))
            if get("approvalDescriptor") is not None:
                approval["descriptor"] = chunk["approvalDescriptor"]
            if "inputSchemaInput" in chunk:
                approval["inputSchemaInput"] = chunk["inputSchemaInput"]
            if get("signature") is not None:
                approval["signature"] = chunk["signature"]
            part["approval"] = approval
        elif chunk_type == "tool-output-denied":
            self._tool_invocation(call_id)["state"] = "output-denied"
        elif chunk_type == "tool-output-available" or chunk_type == "tool-output-error":
            part = self._tool_invocation(call_id)
            dynamic = part["type"] == "dynamic-tool"
            options = {
                **common,
                "toolName": part.get("toolName", UNDEFINED) if dynamic else static_tool_name(part),
                "input": part.get("input", UNDEFINED),
                "title": part.get("title", UNDEFINED),
                "toolMetadata": coalesce(
                    get("toolMetadata", UNDEFINED), part.get("toolMetadata", UNDEFINED)
                ),
            }
            if chunk_type == "tool-output-available":
                options["state"] = "output-available"
                options["output"] = get("output", UNDEFINED)
                options["preliminary"] = get("preliminary", UNDEFINED)
            else:
                options["state"] = "output-error"
                options["errorText"] = get("errorText", UNDEFINED)
                if not dynamic:
                    options["rawInput"] = part.get("rawInput", UNDEFINED)
            self._update_tool(dynamic, options, part)
        self._write()

    # --- reading ------------------------------------------------------------------------------

    def snapshot(self) -> UIMessage:
        """An independent deep copy of the message as the SDK last yielded it."""
        self._flush_all()
        message = {k: clone_json(v) for k, v in self._message.items() if k != "parts"}
        parts = self._parts
        if self._unwritten_steps:
            parts = parts[: len(parts) - self._unwritten_steps]
        message["parts"] = [clone_json(part) for part in parts]
        return message  # type: ignore[return-value]

    def parts_json(self) -> bytes:
        """The parts of ``snapshot()`` encoded as JSON, without copying them first (for
        checkpoints: the encoding is taken at once, before any other chunk is pushed)."""
        self._flush_all()
        parts = self._parts
        if self._unwritten_steps:
            parts = parts[: len(parts) - self._unwritten_steps]
        return orjson.dumps(parts, option=orjson.OPT_NON_STR_KEYS)

    @property
    def message_id(self) -> str:
        """The current message id."""
        return str(self._message["id"])


def accumulate(chunks: Iterable[Chunk], *, seed: UIMessage | None = None) -> UIMessage:
    """Fold ``chunks`` (onto ``seed``, as ``readUIMessageStream({message: seed})``) into a message.

    When no chunk makes the SDK yield a snapshot, the result is the seed (or an empty assistant
    message with id ``""``) where the SDK would yield nothing.
    """
    accumulator = Accumulator(seed)
    for chunk in chunks:
        accumulator.push(chunk)
    return accumulator.snapshot()
