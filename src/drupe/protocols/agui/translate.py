"""Drupe UI-stream chunks -> AG-UI events, for one run (pure: no I/O, no clock).

Contract (one ``AguiRun`` per AG-UI run, fed the chunks of the ONE answer it follows):

* ``started()``: ``RUN_STARTED`` (thread, run, the producer's protocol version).
* ``feed(chunk)``: the events the chunk becomes, in order:

  ==========================  ================================================================
  Drupe chunk                 AG-UI events
  ==========================  ================================================================
  ``start``                   none (remembers the message id: TEXT messages and tool calls
                              carry it, the first text part as is, later ones ``<id>:<n>``;
                              in a ``continuation`` run every text message is
                              ``<id>:<runId>:<n>``, so it follows the client's tool messages)
  ``start-step``/``finish-``  ``STEP_STARTED``/``STEP_FINISHED`` (``step-<n>``)
  ``text-*``                  ``TEXT_MESSAGE_START``/``_CONTENT``/``_END``
  ``reasoning-*``             ``REASONING_START`` + ``REASONING_MESSAGE_START``, ``..._CONTENT``,
                              ``REASONING_MESSAGE_END`` + ``REASONING_END``
  ``tool-input-start/delta``  ``TOOL_CALL_START``/``TOOL_CALL_ARGS``
  ``tool-input-available``    ``TOOL_CALL_END`` (START and the whole ARGS first when the input
                              arrived in one piece)
  ``tool-output-available``   ``TOOL_CALL_RESULT`` (the output as JSON text; none for a
                              client-side tool's call: the client sent that result)
  ``tool-output-available``   ``ACTIVITY_SNAPSHOT`` (``activityType`` ``tool-progress``,
  with ``preliminary``        ``messageId`` ``tool-progress-<toolCallId>``, ``content``
                              ``{toolCallId, output}``; each replaces the last)
  ``tool-output-error``       ``TOOL_CALL_RESULT`` with the error text
  ``tool-output-denied``      ``TOOL_CALL_RESULT`` ``"denied"``
  ``tool-approval-request``   nothing now; the run ends with an ``interrupt`` outcome (the
                              call of a client-side tool stays a pending tool call instead)
  ``data-*``, sources, files  ``CUSTOM`` (``name`` = the chunk type, ``value`` = the chunk)
  ``error``                   nothing now; its text is the ``RUN_ERROR`` message
  ==========================  ================================================================

* ``finished(status, reason=..., error=...)``: closes whatever is still open (a stopped answer
  ends mid-part), then ``RUN_FINISHED`` (``success``: the unanswered tool calls as
  ``pendingToolCallIds``; approvals asked: ``interrupt`` with one ``Interrupt`` per approval,
  ``reason = "tool_approval"``, ``id`` = the approval id; a stop: ``cancelled``) or
  ``RUN_ERROR``. Nothing is emitted after it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ag_ui.core import (
    PROTOCOL_VERSION,
    ActivitySnapshotEvent,
    BaseEvent,
    CustomEvent,
    Interrupt,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

__all__ = ["APPROVAL_REASON", "AguiRun", "RunEnd"]

APPROVAL_REASON = "tool_approval"
"""``Interrupt.reason`` of a Drupe tool approval (answer it with a ``resume`` entry)."""

RunEnd = Literal["success", "paused", "error"]

_PASSED_AS_CUSTOM = ("source-url", "source-document", "file", "message-metadata")


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


@dataclass(slots=True)
class AguiRun:
    """The translation state of one AG-UI run."""

    thread_id: str
    run_id: str
    client_tools: frozenset[str] = frozenset()
    """The client-side tools of the thread (their calls are the client's to answer)."""
    client_results: frozenset[str] = frozenset()
    """Tool calls whose results the client sent in this run's input."""
    continuation: bool = False
    """The run continues an answer an earlier run began (approvals, client tool results)."""
    message_id: str | None = None
    _names: dict[str, str] = field(default_factory=dict)
    _texts: dict[str, str] = field(default_factory=dict)
    """Drupe text part id -> the AG-UI message id it streams into (open parts only)."""
    _text_count: int = 0
    _reasoning: dict[str, str] = field(default_factory=dict)
    _open_tools: set[str] = field(default_factory=set)
    _called: list[str] = field(default_factory=list)
    """Tool calls made in this run, in order."""
    _answered: set[str] = field(default_factory=set)
    _step: int = 0
    _step_open: bool = False
    _approvals: list[Interrupt] = field(default_factory=list)
    _errors: list[str] = field(default_factory=list)
    _ended: bool = False

    def started(self) -> list[BaseEvent]:
        return [
            RunStartedEvent(
                thread_id=self.thread_id, run_id=self.run_id, protocol_version=PROTOCOL_VERSION
            )
        ]

    # --- chunks ----------------------------------------------------------------------------

    def feed(self, chunk: Mapping[str, Any]) -> list[BaseEvent]:
        if self._ended:
            return []
        kind = chunk.get("type")
        match kind:
            case "start":
                message_id = chunk.get("messageId")
                if isinstance(message_id, str) and self.message_id is None:
                    self.message_id = message_id
                return []
            case "start-step":
                out: list[BaseEvent] = self._close_step()
                self._step += 1
                self._step_open = True
                return [*out, StepStartedEvent(step_name=f"step-{self._step}")]
            case "finish-step":
                return self._close_step()
            case "text-start":
                return self._text_start(str(chunk["id"]))
            case "text-delta":
                opened = [] if chunk["id"] in self._texts else self._text_start(str(chunk["id"]))
                target = self._texts[chunk["id"]]
                return [*opened, TextMessageContentEvent(message_id=target, delta=chunk["delta"])]
            case "text-end":
                ended = self._texts.pop(str(chunk["id"]), None)
                return [] if ended is None else [TextMessageEndEvent(message_id=ended)]
            case "reasoning-start":
                return self._reasoning_start(str(chunk["id"]))
            case "reasoning-delta":
                part = str(chunk["id"])
                opened = [] if part in self._reasoning else self._reasoning_start(part)
                target = self._reasoning[part]
                return [
                    *opened,
                    ReasoningMessageContentEvent(message_id=target, delta=chunk["delta"]),
                ]
            case "reasoning-end":
                return self._reasoning_end(str(chunk["id"]))
            case "tool-input-start":
                self._names[str(chunk["toolCallId"])] = str(chunk["toolName"])
                return self._tool_start(str(chunk["toolCallId"]), str(chunk["toolName"]))
            case "tool-input-delta":
                call = str(chunk["toolCallId"])
                if call not in self._open_tools:
                    return []
                return [ToolCallArgsEvent(tool_call_id=call, delta=chunk["inputTextDelta"])]
            case "tool-input-available" | "tool-input-error":
                call = str(chunk["toolCallId"])
                self._names[call] = str(chunk["toolName"])
                out = []
                if call not in self._open_tools and call not in self._called:
                    out += self._tool_start(call, str(chunk["toolName"]))
                    out.append(
                        ToolCallArgsEvent(tool_call_id=call, delta=_json_text(chunk["input"]))
                    )
                if call in self._open_tools:
                    self._open_tools.discard(call)
                    out.append(ToolCallEndEvent(tool_call_id=call))
                if kind == "tool-input-error":
                    out.append(self._result(call, str(chunk["errorText"])))
                return out
            case "tool-output-available":
                call = str(chunk["toolCallId"])
                if chunk.get("preliminary") is True:  # a running call's progress
                    return [_progress(call, chunk.get("output"))]
                if call in self.client_results or self._names.get(call) in self.client_tools:
                    self._answered.add(call)
                    return []  # the client's own result: it has it already
                return [self._result(call, _json_text(chunk["output"]))]
            case "tool-output-error":
                return [self._result(str(chunk["toolCallId"]), str(chunk["errorText"]))]
            case "tool-output-denied":
                return [self._result(str(chunk["toolCallId"]), "denied")]
            case "tool-approval-request":
                call = str(chunk["toolCallId"])
                if self._names.get(call) in self.client_tools:
                    return []  # a client-side tool: the call is pending, the client answers it
                self.awaits_approval(str(chunk["approvalId"]), call)
                return []
            case "error":
                self._errors.append(str(chunk.get("errorText") or "error"))
                return []
            case "finish" | "abort":
                return []
            case str() if kind.startswith("data-") or kind in _PASSED_AS_CUSTOM:
                return [CustomEvent(name=kind, value=dict(chunk))]
            case _:
                return []

    def awaits_approval(self, approval_id: str, tool_call_id: str) -> None:
        """The answer waits for this approval: the run ends with an interrupt for it."""
        self._approvals.append(
            Interrupt(
                id=approval_id,
                reason=APPROVAL_REASON,
                tool_call_id=tool_call_id,
                message=f"approve the call {tool_call_id}",
            )
        )

    # --- terminal ----------------------------------------------------------------------------

    def finished(
        self, status: RunEnd, *, reason: str | None = None, error: str | None = None
    ) -> list[BaseEvent]:
        """Close what is open, then the run's terminal event."""
        if self._ended:
            return []
        self._ended = True
        out = self._close_all()
        if status == "error":
            message = error or (self._errors[-1] if self._errors else "the answer failed")
            return [*out, RunErrorEvent(message=message, code="answer_failed")]
        if status == "paused" and not self._approvals:
            return [
                *out,
                RunFinishedEvent(
                    thread_id=self.thread_id,
                    run_id=self.run_id,
                    outcome=RunFinishedCancelledOutcome(),
                    result={"reason": reason} if reason else None,
                ),
            ]
        if self._approvals:
            outcome: Any = RunFinishedInterruptOutcome(interrupts=list(self._approvals))
        else:
            pending = [c for c in self._called if c not in self._answered]
            outcome = RunFinishedSuccessOutcome(pending_tool_call_ids=pending or None)
        return [
            *out,
            RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome),
        ]

    def failed(self, message: str, code: str) -> list[BaseEvent]:
        """End the run with ``RUN_ERROR`` now (the answer could not be followed)."""
        if self._ended:
            return []
        self._ended = True
        return [*self._close_all(), RunErrorEvent(message=message, code=code)]

    @property
    def pending_tool_calls(self) -> list[str]:
        return [c for c in self._called if c not in self._answered]

    # --- helpers ----------------------------------------------------------------------------

    def _owner(self) -> str:
        return self.message_id or self.run_id

    def _text_start(self, part: str) -> list[BaseEvent]:
        if part in self._texts:
            return []
        self._text_count += 1
        owner = self._owner()
        if self.continuation:
            target = f"{owner}:{self.run_id}:{self._text_count}"
        else:
            target = owner if self._text_count == 1 else f"{owner}:{self._text_count}"
        self._texts[part] = target
        return [TextMessageStartEvent(message_id=target, role="assistant")]

    def _reasoning_start(self, part: str) -> list[BaseEvent]:
        if part in self._reasoning:
            return []
        target = f"{self._owner()}:reasoning:{len(self._reasoning) + 1}:{part}"
        self._reasoning[part] = target
        return [
            ReasoningStartEvent(message_id=target),
            ReasoningMessageStartEvent(message_id=target),
        ]

    def _reasoning_end(self, part: str) -> list[BaseEvent]:
        target = self._reasoning.pop(part, None)
        if target is None:
            return []
        return [ReasoningMessageEndEvent(message_id=target), ReasoningEndEvent(message_id=target)]

    def _tool_start(self, call: str, name: str) -> list[BaseEvent]:
        if call in self._open_tools or call in self._called:
            return []
        self._open_tools.add(call)
        self._called.append(call)
        return [
            ToolCallStartEvent(
                tool_call_id=call, tool_call_name=name, parent_message_id=self._owner()
            )
        ]

    def _result(self, call: str, content: str) -> BaseEvent:
        self._answered.add(call)
        return ToolCallResultEvent(
            message_id=f"{self._owner()}:result:{call}", tool_call_id=call, content=content
        )

    def _close_step(self) -> list[BaseEvent]:
        if not self._step_open:
            return []
        self._step_open = False
        return [StepFinishedEvent(step_name=f"step-{self._step}")]

    def _close_all(self) -> list[BaseEvent]:
        out: list[BaseEvent] = [TextMessageEndEvent(message_id=t) for t in self._texts.values()]
        self._texts.clear()
        for part in list(self._reasoning):
            out += self._reasoning_end(part)
        for call in [c for c in self._called if c in self._open_tools]:
            out.append(ToolCallEndEvent(tool_call_id=call))
        self._open_tools.clear()
        out += self._close_step()
        return out


def _progress(call: str, output: Any) -> ActivitySnapshotEvent:
    """A running tool call's progress snapshot (it replaces the call's previous one)."""
    return ActivitySnapshotEvent(
        message_id=f"tool-progress-{call}",
        activity_type="tool-progress",
        content={"toolCallId": call, "output": output},
    )
