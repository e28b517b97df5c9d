"""Claude Agent SDK messages -> runtime events (the Claude Code driver's translation).

``Translator`` is a synchronous state machine: ``feed(message)`` returns the runtime events one
SDK message produces, in order. It owns the per-connection translation state (open content
blocks, the turn's usage, the turn flag; through ``SystemTracker`` the resume token and an open
compaction) and reads the connection's ``SteerHolder`` to place the steer boundary. Mapping
(reference §6.8):

* top-level ``StreamEvent`` -> UI chunks: ``start-step``/``finish-step`` per model message,
  ``text-*``, ``reasoning-*`` (thinking), ``tool-input-start/delta/available`` (tool_use).
  Events whose ``parent_tool_use_id`` is set (subagents) produce nothing;
* the first top-level ``message_start`` after a steer injection -> ``SteerBoundary`` BEFORE that
  message's chunks;
* top-level ``UserMessage`` tool results -> ``tool-output-available`` / ``tool-output-error``
  (a call the human denied already got ``tool-output-denied``, so its error result is dropped);
* ``SystemMessage`` -> what ``SystemTracker`` (``system_events.py``) makes of it: the resume
  token, slash commands, compaction events and ``api_retry``;
* each finished top-level model message -> ``UsageEvent`` (its own usage);
* ``ResultMessage`` -> usage ``message-metadata`` chunk, ``SteerUndelivered`` for steers never
  injected, then ``TurnComplete`` or, when ``is_error`` (even with subtype ``success``),
  ``ErrorEvent``. At a steer boundary the usage of the messages so far is written first (a
  ``message-metadata`` chunk before ``SteerBoundary``), so it binds to the rolled row (A1a);
  the result's metadata then carries the rest of the turn (A2's share).

The driver emits no ``start``/``finish`` chunks: the host frames each turn (its turn stream
emits ``start`` with the row's message id; the stream manager fans out ``finish`` at the
terminal). A top-level ``message_start`` with no active turn is a turn the CLI began by itself
(it reports a background subagent's result): ``RuntimeTurnStart``, then that turn is
translated like any other, up to its result. While a turn started by ``send`` runs, the CLI
stamps what it answers with ``user_message_uuid(s)``, and the turn only takes what answers its
own message's uuid (a background turn finishing meanwhile is dropped).

Must never: do I/O, or raise on an unknown message (unknown shapes are ignored).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from claude_agent_sdk import (
    AssistantMessage,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

from drupe.chunks.types import Chunk
from drupe.sessions.drivers.base import (
    ChunkEvent,
    ErrorEvent,
    RuntimeEvent,
    RuntimeTurnStart,
    SteerBoundary,
    SteerUndelivered,
    TurnComplete,
    UsageEvent,
)
from drupe.sessions.drivers.claude_code.blocks import StepChunker
from drupe.sessions.drivers.claude_code.content import tool_output
from drupe.sessions.drivers.claude_code.steer import SteerHolder
from drupe.sessions.drivers.claude_code.system_events import SystemTracker
from drupe.sessions.drivers.claude_code.usage import (
    add_usage,
    minus_usage,
    ui_usage,
    usage_metadata,
)

__all__ = ["Translator"]


class Translator:
    """Per-connection translation state; ``feed`` maps one SDK message to runtime events."""

    __slots__ = (
        "_answering",
        "_flushed",
        "_message",
        "_turn_uuid",
        "_unflushed",
        "denied",
        "model_id",
        "steers",
        "steps",
        "system",
        "turn_active",
    )

    def __init__(
        self,
        steers: SteerHolder,
        *,
        model_id: str | None = None,
        resume_token: str | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.steers = steers
        self.model_id = model_id
        self.system = SystemTracker(resume_token)
        if clock is not None:
            self.system.clock = clock
        self.turn_active = False
        self.denied: set[str] = set()
        self.steps = StepChunker()
        self._message: dict[str, Any] = {}
        """The current top-level model message: its id and raw usage so far."""
        self._unflushed: dict[str, int] = {}
        """UI usage of the turn's finished messages not yet written to a row."""
        self._flushed: dict[str, int] = {}
        """UI usage already written to a rolled row (A1a) at a steer boundary."""
        self._turn_uuid: str | None = None
        self._answering: tuple[str, ...] | None = None
        """The user messages the CLI says it is answering (from ``user_message_uuid(s)``)."""

    @property
    def resume_token(self) -> str | None:
        """The CLI session id the next connection resumes."""
        return self.system.resume_token

    # -- turn framing -----------------------------------------------------------------------

    def begin_turn(self, user_uuid: str | None = None) -> None:
        """A turn starts with the user message stamped ``user_uuid`` (None: not tracked)."""
        self.turn_active = True
        self._turn_uuid = user_uuid
        self._answering = None
        self.denied.clear()
        self.steps.begin_turn()
        self._message = {}
        self._unflushed = {}
        self._flushed = {}

    @property
    def tool_inputs(self) -> dict[str, Any]:
        return self.steps.tool_inputs

    @property
    def available(self) -> set[str]:
        return self.steps.available

    # -- entry point ------------------------------------------------------------------------

    def feed(self, message: object) -> list[RuntimeEvent]:
        if isinstance(message, StreamEvent | AssistantMessage | ResultMessage):
            self._note_answering(message)
        if isinstance(message, StreamEvent):
            if message.parent_tool_use_id is not None:
                return []
            started: list[RuntimeEvent] = []
            if not self.turn_active and message.event.get("type") == "message_start":
                # The CLI began a turn by itself (e.g. to report a background subagent).
                answering = self._answering[0] if self._answering else None
                self.begin_turn(answering)
                started.append(RuntimeTurnStart())
            if not self._ours():
                return []
            return started + self._stream_event(message.event)
        if isinstance(message, AssistantMessage):
            if message.parent_tool_use_id is None and self._ours():
                for block in message.content:
                    if isinstance(block, ToolUseBlock):
                        self.steps.tool_inputs[block.id] = block.input
            return []
        if isinstance(message, UserMessage):
            if message.parent_tool_use_id is not None or not self.turn_active:
                return []
            return self._tool_results(message)
        if isinstance(message, ResultMessage):
            return self._result(message)
        if isinstance(message, SystemMessage):
            return self.system.system(message, turn_active=self.turn_active)
        return []

    def _note_answering(self, message: StreamEvent | AssistantMessage | ResultMessage) -> None:
        if message.user_message_uuids:
            self._answering = tuple(message.user_message_uuids)
        elif message.user_message_uuid:
            self._answering = (message.user_message_uuid,)

    def _ours(self) -> bool:
        """Whether the CLI is answering this turn (not a turn it started on its own)."""
        if not self.turn_active:
            return False
        if self._turn_uuid is None or self._answering is None:
            return True
        return self._turn_uuid in self._answering

    # -- stream events ----------------------------------------------------------------------

    def _chunks(self, *chunks: Chunk) -> list[RuntimeEvent]:
        return [ChunkEvent(c) for c in chunks]

    def _stream_event(self, event: Mapping[str, Any]) -> list[RuntimeEvent]:
        kind = event.get("type")
        out: list[RuntimeEvent] = []
        if kind == "message_start":
            out += self.system.settle_compaction()
            out += self._chunks(*self.steps.close_step())
            out += self._end_message()
            boundary = self.steers.take_boundary()
            if boundary:
                # Usage so far binds to the row that ends here (A1a), before the roll.
                if self._unflushed:
                    out += self._chunks(self._metadata(self._unflushed))
                    self._flushed = add_usage(self._flushed, self._unflushed)
                    self._unflushed = {}
                out.append(SteerBoundary(boundary))
            message = event.get("message") or {}
            self._message = {"id": message.get("id"), "usage": dict(message.get("usage") or {})}
            out += self._chunks(*self.steps.open_step())
        elif kind == "message_delta":
            if self._message:
                self._message["usage"].update(event.get("usage") or {})
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            out += self._chunks(*self.steps.block_start(int(event.get("index", 0)), block))
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            out += self._chunks(*self.steps.block_delta(int(event.get("index", 0)), delta))
        elif kind == "content_block_stop":
            out += self._chunks(*self.steps.block_stop(int(event.get("index", 0))))
        elif kind == "message_stop":
            out += self._chunks(*self.steps.close_step())
            out += self._end_message()
        return out

    def _end_message(self) -> list[RuntimeEvent]:
        """Account the finished model message: one ``usage`` event; usage kept for the row."""
        if not self._message:
            return []
        message, self._message = self._message, {}
        usage = ui_usage(message["usage"])
        self._unflushed = add_usage(self._unflushed, usage)
        invocation = {
            "requestId": message["id"],
            "model": self.model_id,
            "messageAssociation": "current-turn",
            "usage": usage,
        }
        return [UsageEvent(invocation)]

    def _metadata(self, usage: Mapping[str, int], cost: float | None = None) -> Chunk:
        return {
            "type": "message-metadata",
            "messageMetadata": usage_metadata(usage, self.model_id, cost),
        }

    # -- tool results -----------------------------------------------------------------------

    def _tool_results(self, message: UserMessage) -> list[RuntimeEvent]:
        if isinstance(message.content, str):
            return []
        out: list[RuntimeEvent] = []
        for block in message.content:
            if not isinstance(block, ToolResultBlock):
                continue
            call_id = block.tool_use_id
            if call_id in self.denied:
                continue
            if block.is_error:
                text = tool_output(block.content)
                error = text if isinstance(text, str) else json.dumps(text)
                out += self._chunks(
                    {"type": "tool-output-error", "toolCallId": call_id, "errorText": error}
                )
            else:
                out += self._chunks(
                    {
                        "type": "tool-output-available",
                        "toolCallId": call_id,
                        "output": tool_output(block.content),
                    }
                )
        return out

    # -- the end of a turn ------------------------------------------------------------------

    def _result(self, result: ResultMessage) -> list[RuntimeEvent]:
        out = self.system.settle_compaction(ending=True)
        out += self.system.token(result.session_id)
        if not self._ours():
            return out  # no turn, or the end of a turn the runtime started itself
        out += self._chunks(*self.steps.close_step())
        out += self._end_message()
        # The result's usage covers the whole turn; a rolled row (A1a) already got its share.
        usage = minus_usage(ui_usage(result.usage), self._flushed)
        out += self._chunks(self._metadata(usage, result.total_cost_usd))
        undelivered = self.steers.end_turn()
        if undelivered:
            out.append(SteerUndelivered(undelivered))
        self.turn_active = False
        if result.is_error:
            error: dict[str, Any] = {
                "name": "ClaudeCodeError",
                "message": result.result or "; ".join(result.errors or []) or result.subtype,
            }
            if result.api_error_status is not None:
                error["statusCode"] = result.api_error_status
            out.append(ErrorEvent(error))
        else:
            out.append(TurnComplete())
        return out

    def abandon_turn(self, error: Mapping[str, Any]) -> list[RuntimeEvent]:
        """The runtime died mid-turn: close open parts, return steers, and emit ``error``.

        An open compaction fails with it (nothing will ever end it on this connection)."""
        out: list[RuntimeEvent] = []
        if self.system.compacting or self.system.settle_pending:
            out += self.system.fail_compaction(str(error.get("message") or "the runtime ended"))
        if not self.turn_active:
            return out
        out += self._chunks(*self.steps.close_step())
        undelivered = self.steers.end_turn()
        if undelivered:
            out.append(SteerUndelivered(undelivered))
        self.turn_active = False
        out.append(ErrorEvent(dict(error)))
        return out
