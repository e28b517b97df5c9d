"""AI SDK UI messages -> pydantic-ai messages, and what an approval continuation must answer.

Pure and synchronous:

- ``to_model_messages``: UI message history -> pydantic-ai ``ModelRequest`` / ``ModelResponse``
  list. User text and files become a ``UserPromptPart``; an assistant message is split at its
  ``step-start`` parts, each step becoming one ``ModelResponse`` (text, reasoning, tool calls)
  followed by one ``ModelRequest`` with the tool returns it has (output, error, denial).
  ``data-*``, ``source-*`` and ``step-start`` parts are not sent. A thinking part's signature,
  id and provider travel in the reasoning part's ``providerMetadata["drupe"]`` so a provider
  that checks them (Anthropic extended thinking) accepts the history back. A tool call without a
  result (a ``preliminary`` output, a running call's progress, is not one) is answered with an
  ``interrupted`` return, except for the decided or pending approvals in the open tail of an
  approval continuation (``open_tail=True``), which the loop answers.
  With ``wrap_last_user_as_steer`` the model-facing copy of the last user message's text is
  wrapped in a steer system reminder; the UI dicts are never mutated.
- ``continuation_seed`` / ``approval_decisions``: when the history ends with an assistant message
  (the seed of an approval continuation), the decided approvals of its last step, in order.
  An approval still ``approval-requested`` counts as denied (fail closed).

The other direction (stream events -> chunks) is ``drupe.agent.chunker``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserContent,
    UserPromptPart,
    VideoUrl,
)

from drupe.agent.chunker import PROVIDER_METADATA_KEY
from drupe.chunks.types import UIMessage, UIPart

__all__ = [
    "PROVIDER_METADATA_KEY",
    "ApprovalDecision",
    "approval_decisions",
    "continuation_seed",
    "STEER_REMINDER",
    "denied_return",
    "steer_wrap",
    "to_model_messages",
    "tool_name_of",
]

STEER_REMINDER = (
    "<system-reminder>\n"
    "The user sent the following message while you were working on the previous request:\n"
    "{text}\n\n"
    "Address this message and continue with your tasks.\n"
    "</system-reminder>"
)


def steer_wrap(text: str) -> str:
    """Return the model-facing form of a steer message."""
    return STEER_REMINDER.format(text=text)


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
    if state == "output-available" and part.get("preliminary") is not True:
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


# --- approval continuation ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecision:
    """A human decision on one gated tool call of the continuation seed."""

    call_id: str
    tool_name: str
    input: Mapping[str, Any]
    approved: bool
    reason: str | None = None


def continuation_seed(messages: Sequence[UIMessage]) -> UIMessage | None:
    """Return the last message when it is an assistant message (an approval continuation)."""
    if messages and messages[-1].get("role") == "assistant":
        return messages[-1]
    return None


def approval_decisions(seed: UIMessage) -> list[ApprovalDecision]:
    """Return the decisions on the seed's last step, in part order (undecided = denied)."""
    decisions: list[ApprovalDecision] = []
    for part in _last_step(seed.get("parts") or []):
        name = tool_name_of(part)
        state = part.get("state")
        if name is None or part.get("providerExecuted"):
            continue
        if state not in ("approval-responded", "approval-requested"):
            continue
        approval = part.get("approval") or {}
        responded = state == "approval-responded"
        tool_input = part.get("input")
        decisions.append(
            ApprovalDecision(
                call_id=str(part.get("toolCallId", "")),
                tool_name=name,
                input=tool_input if isinstance(tool_input, dict) else {},
                approved=responded and approval.get("approved") is True,
                reason=approval.get("reason") if responded else "no decision was made",
            )
        )
    return decisions


def _last_step(parts: Sequence[UIPart]) -> Sequence[UIPart]:
    for index in range(len(parts) - 1, -1, -1):
        if parts[index].get("type") == "step-start":
            return parts[index + 1 :]
    return parts
