"""``message_to_chunks``: a chunk run that rebuilds a stored message from nothing.

A subscriber that resumes a continuation (an approval continuation extends an existing assistant
message) holds no seed: the AI SDK's resume folds the replay into a fresh message, and would
reject a ``tool-output-available`` for a tool call it never saw. Prefixing the replay with
``message_to_chunks(seed)`` gives it that message first. Contract:
``accumulate(message_to_chunks(m))["parts"] == m["parts"]`` for every message the accumulator can
produce, except ``approval-responded`` tool parts, which the v6 chunk set cannot express (they
come back as ``approval-requested``; the continuation's next chunk settles them). Pure; never
mutates its input. Streaming (open) text and reasoning parts are left open, so live deltas can
continue them.
"""

from __future__ import annotations

import json
from typing import Any

from drupe.chunks.types import Chunk, UIMessage, UIPart

__all__ = ["message_to_chunks"]

_PASS_THROUGH = ("source-url", "source-document", "file")


def _tool_chunks(part: UIPart) -> list[Chunk]:
    dynamic = part["type"] == "dynamic-tool"
    name = part["toolName"] if dynamic else part["type"][5:]
    call_id = part["toolCallId"]
    common: dict[str, Any] = {"toolCallId": call_id, "toolName": name}
    if dynamic:
        common["dynamic"] = True
    for key in ("providerExecuted", "title", "toolMetadata", "inputEncoding"):
        if key in part:
            common[key] = part[key]
    state = part.get("state")
    start: Chunk = {"type": "tool-input-start", **common}
    if state == "input-streaming":
        out = [start]
        raw = part.get("rawInput")
        text = raw if isinstance(raw, str) else None
        if text is None and part.get("input") is not None:
            text = json.dumps(part["input"])
        if text:
            out.append({"type": "tool-input-delta", "toolCallId": call_id, "inputTextDelta": text})
        return out
    if state == "output-error" and "rawInput" in part and "input" not in part:
        failed: Chunk = {
            "type": "tool-input-error",
            **common,
            "input": part.get("rawInput"),
            "errorText": part.get("errorText", ""),
        }
        if "resultProviderMetadata" in part:
            failed["providerMetadata"] = part["resultProviderMetadata"]
        return [failed]
    available: Chunk = {"type": "tool-input-available", **common, "input": part.get("input")}
    if "callProviderMetadata" in part:
        available["providerMetadata"] = part["callProviderMetadata"]
    out = [available]
    approval = part.get("approval")
    if isinstance(approval, dict) and "id" in approval:
        out.append(
            {"type": "tool-approval-request", "approvalId": approval["id"], "toolCallId": call_id}
        )
    tail: dict[str, Any] = {"toolCallId": call_id}
    if dynamic:
        tail["dynamic"] = True
    if "providerExecuted" in part:
        tail["providerExecuted"] = part["providerExecuted"]
    if state == "output-available":
        done: Chunk = {"type": "tool-output-available", **tail, "output": part.get("output")}
        if part.get("preliminary"):
            done["preliminary"] = True
        if "resultProviderMetadata" in part:
            done["providerMetadata"] = part["resultProviderMetadata"]
        out.append(done)
    elif state == "output-error":
        error: Chunk = {"type": "tool-output-error", **tail, "errorText": part.get("errorText", "")}
        if "resultProviderMetadata" in part:
            error["providerMetadata"] = part["resultProviderMetadata"]
        out.append(error)
    elif state == "output-denied":
        out.append({"type": "tool-output-denied", "toolCallId": call_id})
    return out


def _text_chunks(part: UIPart, index: int) -> list[Chunk]:
    kind = part["type"]  # "text" or "reasoning"
    part_id = str(part["id"]) if "id" in part else f"{kind[0]}{index}"
    start: Chunk = {"type": f"{kind}-start", "id": part_id}
    meta = part.get("providerMetadata")
    if meta is not None:
        start["providerMetadata"] = meta
    out = [start]
    if part.get("text"):
        out.append({"type": f"{kind}-delta", "id": part_id, "delta": part["text"]})
    if part.get("state") != "streaming":
        end: Chunk = {"type": f"{kind}-end", "id": part_id}
        if meta is not None:
            end["providerMetadata"] = meta
        out.append(end)
    return out


def message_to_chunks(message: UIMessage, *, close_step: bool = False) -> list[Chunk]:
    """Chunks that fold into ``message`` (see the module contract)."""
    start: Chunk = {"type": "start", "messageId": message["id"]}
    if message.get("metadata") is not None:
        start["messageMetadata"] = message["metadata"]
    out: list[Chunk] = [start]
    in_step = False
    for index, part in enumerate(message["parts"]):
        kind = part.get("type", "")
        if kind == "step-start":
            if in_step:
                out.append({"type": "finish-step"})
            out.append({"type": "start-step"})
            in_step = True
        elif kind in ("text", "reasoning"):
            out.extend(_text_chunks(part, index))
        elif kind == "dynamic-tool" or kind.startswith("tool-"):
            out.extend(_tool_chunks(part))
        elif kind.startswith("data-"):
            data: Chunk = {"type": kind, "data": part.get("data")}
            if "id" in part:
                data["id"] = part["id"]
            out.append(data)
        elif kind in _PASS_THROUGH:
            out.append(dict(part))
    if in_step and close_step:
        out.append({"type": "finish-step"})
    return out
