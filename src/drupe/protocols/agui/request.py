"""An AG-UI ``RunAgentInput`` -> what Drupe does with it (pure: no I/O).

Contract:

* Drupe's own tree is the source of truth: of ``messages`` only the LAST one is read. It must
  be a user message (its text content becomes the turn's user message), or the tool messages
  that answer the client-side tool calls the previous run ended with (``ToolResults``: the
  run continues that answer), unless ``resume`` answers interrupts (the run then continues the
  answer that asked for the approvals).
* ``resume`` entries answer Drupe tool approvals (``Interrupt.reason = "tool_approval"``,
  ``interruptId`` = the approval id): ``resolved`` with ``payload`` ``true`` /
  ``{"approved": true}`` approves, anything else (``cancelled``, ``false``,
  ``{"approved": false, "reason": ...}``) denies.
* ``protocolVersion`` (when sent) must be 1.x.
* ``forwardedProps.strategy`` picks the double-text strategy of a submit into a live thread
  (``enqueue`` by default, ``interrupt``, ``reject``, ``rollback``).
* ``tools`` (client-side tools, at most ``MAX_TOOLS``) are returned as ``ClientTool``s for the
  thread. Non-text content parts are refused. Every refusal raises ``BadRunInput`` before
  anything is stored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ag_ui.core import ResumeEntry, RunAgentInput, TextPart, ToolMessage, UserMessage

from drupe.admission.base import ALL_STRATEGIES, Strategy
from drupe.tools.client_tools import MAX_TOOLS, ClientTool

__all__ = ["Approvals", "BadRunInput", "RunPlan", "ToolResults", "UserTurn", "plan_run"]


class BadRunInput(Exception):
    """The input cannot be run; ``status`` is the HTTP status, ``code`` the RUN_ERROR code."""

    def __init__(self, message: str, *, status: int = 400, code: str = "invalid_input") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code


@dataclass(frozen=True, slots=True)
class UserTurn:
    parts: list[dict[str, Any]]
    strategy: Strategy


@dataclass(frozen=True, slots=True)
class Approvals:
    decisions: list[tuple[str, bool, str | None]]
    """``(approval id, approved, reason)`` per resume entry."""


@dataclass(frozen=True, slots=True)
class ToolResults:
    results: list[tuple[str, str]]
    """``(tool call id, output text)`` per trailing tool message, in order."""


RunPlan = UserTurn | Approvals | ToolResults


def client_tools(run: RunAgentInput) -> list[ClientTool]:
    """The run's client-side tools (raises ``BadRunInput`` past ``MAX_TOOLS``)."""
    tools = list(run.tools or ())
    if len(tools) > MAX_TOOLS:
        raise BadRunInput(f"tools: at most {MAX_TOOLS} client-side tools, got {len(tools)}")
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise BadRunInput("tools: two tools have the same name")
    return [
        ClientTool(t.name, t.description, t.parameters if isinstance(t.parameters, dict) else {})
        for t in tools
    ]


def _tool_output(message: ToolMessage) -> str:
    content = message.content
    text = (
        content
        if isinstance(content, str)
        else "".join(getattr(part, "text", "") for part in content)
    )
    return f"error: {message.error}\n{text}" if message.error else text


def _decision(entry: ResumeEntry) -> tuple[str, bool, str | None]:
    payload = entry.payload
    if entry.status != "resolved":
        return entry.interrupt_id, False, "cancelled by the client"
    if isinstance(payload, bool):
        return entry.interrupt_id, payload, None
    if isinstance(payload, Mapping) and isinstance(payload.get("approved"), bool):
        reason = payload.get("reason")
        return (
            entry.interrupt_id,
            bool(payload["approved"]),
            (reason if isinstance(reason, str) else None),
        )
    raise BadRunInput(
        f"resume entry {entry.interrupt_id!r}: the payload of a tool approval is true, false "
        'or {"approved": <bool>, "reason": <text>}'
    )


def _text_parts(message: UserMessage, max_chars: int) -> list[dict[str, Any]]:
    content = message.content
    texts: list[str]
    if isinstance(content, str):
        texts = [content]
    else:
        texts = []
        for part in content:
            if not isinstance(part, TextPart):
                raise BadRunInput(
                    f"message {message.id!r}: only text content is supported "
                    f"(got a {getattr(part, 'type', '?')!r} part)",
                    status=422,
                    code="unsupported_content",
                )
            texts.append(part.text)
    chars = sum(len(t) for t in texts)
    if chars > max_chars:
        raise BadRunInput(
            f"the message has {chars} characters; the limit is {max_chars}",
            status=413,
            code="too_large",
        )
    if not any(t.strip() for t in texts):
        raise BadRunInput(f"message {message.id!r} has no text")
    return [{"type": "text", "text": t} for t in texts if t]


def _strategy(forwarded: Any) -> Strategy:
    if not isinstance(forwarded, Mapping) or forwarded.get("strategy") is None:
        return "enqueue"
    wanted = forwarded.get("strategy")
    if wanted not in ALL_STRATEGIES:
        raise BadRunInput(
            f"forwardedProps.strategy: {wanted!r} is not one of {sorted(ALL_STRATEGIES)}"
        )
    return cast(Strategy, wanted)


def plan_run(run: RunAgentInput, *, max_chars: int) -> RunPlan:
    """What the run asks for; raises ``BadRunInput``."""
    version = run.protocol_version
    if version is not None and version.split(".")[0] != "1":
        raise BadRunInput(
            f"protocolVersion {version!r}: this server speaks AG-UI 1.x",
            code="unsupported_version",
        )
    if run.resume:
        return Approvals([_decision(entry) for entry in run.resume])
    messages: Sequence[Any] = run.messages
    if not messages:
        raise BadRunInput("messages: a run needs the user message to answer")
    last = messages[-1]
    if isinstance(last, ToolMessage):
        trailing: list[ToolMessage] = []
        for message in reversed(messages):
            if not isinstance(message, ToolMessage):
                break
            trailing.append(message)
        results = [(m.tool_call_id, _tool_output(m)) for m in reversed(trailing)]
        chars = sum(len(text) for _, text in results)
        if chars > max_chars:
            raise BadRunInput(
                f"the tool results have {chars} characters; the limit is {max_chars}",
                status=413,
                code="too_large",
            )
        return ToolResults(results)
    if not isinstance(last, UserMessage):
        raise BadRunInput(
            f"messages: the last message must be the user message to answer, not a "
            f"{getattr(last, 'role', '?')!r} message (Drupe keeps the thread's history)"
        )
    return UserTurn(_text_parts(last, max_chars), _strategy(run.forwarded_props))
