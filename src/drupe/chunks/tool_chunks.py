"""The ``tool-*`` chunks of the fold: how each one changes a ``MessageState``.

Owns: ``tool_input_delta`` and ``tool_chunk``, the tool branches of the AI SDK's
``processUIMessageStream`` (``ai@6.0.326``): one small handler per tool chunk type, each building
the options of ``updateToolPart`` / ``updateDynamicToolPart`` or setting the part's state.
``drupe.chunks.accumulate`` dispatches here.

Must never: do work beyond the size of the chunk for a ``tool-input-delta`` (the delta is
buffered; ``MessageState.flush_input`` joins and parses it later), or mutate the chunk. Where the
SDK throws (a delta for an unknown call, a chunk for an unknown tool call) raises
``AccumulateError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from drupe.chunks.message_state import AccumulateError, MessageState
from drupe.chunks.partial_json import UNDEFINED
from drupe.chunks.tool_parts import (
    PartialToolCall,
    PendingInput,
    assign,
    coalesce,
    static_tool_name,
    truthy,
)
from drupe.chunks.types import Chunk

__all__ = ["tool_chunk", "tool_input_delta"]

_Handler = Callable[[MessageState, Chunk, dict[str, Any]], None]


def tool_input_delta(state: MessageState, call_id: str, delta: str) -> None:
    """A ``tool-input-delta``: buffer the delta on its call and mark the part streaming."""
    call = state.tool_calls.get(call_id)
    if call is None:
        raise AccumulateError(
            f'Received tool-input-delta for missing tool call with ID "{call_id}". '
            'Ensure a "tool-input-start" chunk is sent before any "tool-input-delta" chunks.'
        )
    dynamic = truthy(call.dynamic)
    target = state.find_in_step(call_id, "dynamic" if dynamic else "static")
    pending = state.pending_inputs.get(call_id)
    if pending is not None and pending.part is not target:
        state.flush_input(call_id)
    call.pieces.append(delta)
    options = {
        "toolCallId": call_id,
        "toolName": call.tool_name,
        "state": "input-streaming",
        "inputEncoding": call.input_encoding,
        "title": call.title,
        "toolMetadata": call.tool_metadata,
    }
    part, existed = state.update_tool(dynamic, options, target)
    state.pending_inputs[call_id] = PendingInput(part, call, existed or not dynamic)
    state.write()


def tool_chunk(state: MessageState, chunk_type: str, chunk: Chunk) -> None:
    """Any other ``tool-*`` chunk; types outside the ai v6 set are ignored, as the SDK does."""
    handler = _HANDLERS.get(chunk_type)
    if handler is None:
        return
    get = chunk.get
    call_id = chunk["toolCallId"]
    state.flush_input(call_id)
    common = {
        "toolCallId": call_id,
        "providerExecuted": get("providerExecuted", UNDEFINED),
        "providerMetadata": get("providerMetadata", UNDEFINED),
    }
    handler(state, chunk, common)
    state.write()


def _input_start(state: MessageState, chunk: Chunk, common: dict[str, Any]) -> None:
    get = chunk.get
    state.tool_calls[chunk["toolCallId"]] = PartialToolCall(
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
    state.update_tool(truthy(get("dynamic", UNDEFINED)), options)


def _input_available(state: MessageState, chunk: Chunk, common: dict[str, Any]) -> None:
    get = chunk.get
    options = {
        **common,
        "toolName": chunk["toolName"],
        "state": "input-available",
        "input": get("input", UNDEFINED),
        "title": get("title", UNDEFINED),
        "toolMetadata": get("toolMetadata", UNDEFINED),
    }
    state.update_tool(truthy(get("dynamic", UNDEFINED)), options)


def _input_error(state: MessageState, chunk: Chunk, common: dict[str, Any]) -> None:
    get = chunk.get
    existing = state.find_in_step(chunk["toolCallId"], "any")
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
    state.update_tool(dynamic, options)


def _approval_request(state: MessageState, chunk: Chunk, common: dict[str, Any]) -> None:
    get = chunk.get
    part = state.tool_invocation(chunk["toolCallId"])
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


def _output_denied(state: MessageState, chunk: Chunk, common: dict[str, Any]) -> None:
    state.tool_invocation(chunk["toolCallId"])["state"] = "output-denied"


def _output(state: MessageState, chunk: Chunk, common: dict[str, Any]) -> None:
    """``tool-output-available`` and ``tool-output-error``."""
    get = chunk.get
    part = state.tool_invocation(chunk["toolCallId"])
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
    if chunk["type"] == "tool-output-available":
        options["state"] = "output-available"
        options["output"] = get("output", UNDEFINED)
        options["preliminary"] = get("preliminary", UNDEFINED)
    else:
        options["state"] = "output-error"
        options["errorText"] = get("errorText", UNDEFINED)
        if not dynamic:
            options["rawInput"] = part.get("rawInput", UNDEFINED)
    state.update_tool(dynamic, options, part)


_HANDLERS: Final[dict[str, _Handler]] = {
    "tool-input-start": _input_start,
    "tool-input-available": _input_available,
    "tool-input-error": _input_error,
    "tool-approval-request": _approval_request,
    "tool-output-denied": _output_denied,
    "tool-output-available": _output,
    "tool-output-error": _output,
}
