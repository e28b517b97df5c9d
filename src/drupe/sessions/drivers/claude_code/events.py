"""Claude Agent SDK messages -> runtime events (the Claude Code driver's translation).

``Translator`` is a synchronous state machine: ``feed(message)`` returns the runtime events one
SDK message produces, in order. It owns the per-connection translation state (open content
blocks, the last resume token, a pending compaction settle, the turn flag) and reads the
connection's ``SteerHolder`` to place the steer boundary. Mapping (reference §6.8):

* top-level ``StreamEvent`` -> UI chunks: ``start-step``/``finish-step`` per model message,
  ``text-*``, ``reasoning-*`` (thinking), ``tool-input-start/delta/available`` (tool_use).
  Events whose ``parent_tool_use_id`` is set (subagents) produce nothing;
* the first top-level ``message_start`` after a steer injection -> ``SteerBoundary`` BEFORE that
  message's chunks;
* top-level ``UserMessage`` tool results -> ``tool-output-available`` / ``tool-output-error``
  (a call the human denied already got ``tool-output-denied``, so its error result is dropped);
* ``system/init`` -> ``ResumeToken`` only when the session id changes (init comes every turn);
  its ``slash_commands`` (and ``commands_changed``) -> ``SupportedCommands`` when they change;
* ``status: compacting`` -> ``CompactionStart``; ``compact_boundary`` -> ``CompactionComplete``
  with an anchor; ``compact_result: success`` with no boundary before the next model call or the
  result -> anchor-less ``CompactionComplete``; a compaction still open at the result settles
  anchor-less too, and one open when the runtime dies fails (exactly one end per compaction);
  ``compact_result: failed``, or a ``compact_error`` without ``compact_result: success``, ->
  ``CompactionError``; ``api_retry`` -> a transient ``data-retry`` chunk (the agent loop's
  shape: the try that comes next, of ``max_retries + 1``) during a turn, and ``ApiRetry``;
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
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
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
    ApiRetry,
    ChunkEvent,
    CompactionAnchor,
    CompactionComplete,
    CompactionError,
    CompactionStart,
    ErrorEvent,
    ResumeToken,
    RuntimeEvent,
    RuntimeTurnStart,
    SteerBoundary,
    SteerUndelivered,
    SupportedCommands,
    TurnComplete,
    UsageEvent,
)
from drupe.sessions.drivers.claude_code.blocks import StepChunker
from drupe.sessions.drivers.claude_code.content import tool_output
from drupe.sessions.drivers.claude_code.steer import SteerHolder
from drupe.sessions.drivers.claude_code.usage import (
    add_usage,
    minus_usage,
    ui_usage,
    usage_metadata,
)

__all__ = ["Translator", "retry_chunk"]

_RETRY_NOISE = frozenset(("type", "subtype", "session_id", "uuid"))


def retry_chunk(retry: Mapping[str, Any]) -> Chunk:
    """The CLI's ``api_retry`` as the agent loop's transient ``data-retry`` chunk."""
    attempt = retry.get("attempt")
    max_retries = retry.get("max_retries")
    error = retry.get("error")
    message = error.get("message") if isinstance(error, Mapping) else error
    return {
        "type": "data-retry",
        "data": {
            "attempt": int(attempt) + 1 if isinstance(attempt, int) else None,
            "maxAttempts": int(max_retries) + 1 if isinstance(max_retries, int) else None,
            "delayMs": retry.get("retry_delay_ms"),
            "statusCode": retry.get("error_status"),
            "message": str(message) if message is not None else None,
        },
        "transient": True,
    }


def _anchor(data: Mapping[str, Any], now: float) -> CompactionAnchor:
    meta = data.get("compact_metadata") or data.get("compactMetadata") or {}
    trigger = meta.get("trigger", "auto")
    post = meta.get("post_tokens", meta.get("postTokens"))
    duration = meta.get("duration_ms", meta.get("durationMs"))
    return CompactionAnchor(
        trigger="manual" if trigger == "manual" else "auto",
        completed_at=now,
        pre_tokens=int(meta.get("pre_tokens", meta.get("preTokens")) or 0),
        post_tokens=int(post) if post is not None else None,
        duration_ms=float(duration) if duration is not None else None,
    )


@dataclass(slots=True)
class Translator:
    """Per-connection translation state; ``feed`` maps one SDK message to runtime events."""

    steers: SteerHolder
    model_id: str | None = None
    resume_token: str | None = None
    clock: Any = time.time
    turn_active: bool = False
    commands: tuple[str, ...] | None = None
    compaction_settle_pending: bool = False
    compacting: bool = False
    """A compaction started (``status: compacting``) and has not ended yet."""
    denied: set[str] = field(default_factory=set)
    steps: StepChunker = field(default_factory=StepChunker)
    _message: dict[str, Any] = field(default_factory=dict)
    """The current top-level model message: its id and raw usage so far."""
    _unflushed: dict[str, int] = field(default_factory=dict)
    """UI usage of the turn's finished messages not yet written to a row."""
    _flushed: dict[str, int] = field(default_factory=dict)
    """UI usage already written to a rolled row (A1a) at a steer boundary."""
    _turn_uuid: str | None = None
    _answering: tuple[str, ...] | None = None
    """The user messages the CLI says it is answering (from ``user_message_uuid(s)``)."""

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
            return self._system(message)
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
            out += self._settle_compaction()
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

    # -- system messages --------------------------------------------------------------------

    def _system(self, message: SystemMessage) -> list[RuntimeEvent]:
        data = message.data
        out: list[RuntimeEvent] = []
        if message.subtype == "init":
            out += self._token(data.get("session_id"))
            out += self._commands(data.get("slash_commands"))
        elif message.subtype == "commands_changed":
            out += self._commands(data.get("commands"))
        elif message.subtype == "status":
            if data.get("status") == "compacting" and not self.compacting:
                self.compacting = True
                out.append(CompactionStart())
            result = data.get("compact_result")
            error = data.get("compact_error")
            if result == "failed" or (error and result != "success"):
                # A ``compact_error`` fails the compaction even without ``compact_result``.
                out += self._fail_compaction(str(error or "compaction failed"))
            elif result == "success":
                self.compaction_settle_pending = True
            elif data.get("status") == "requesting":
                out += self._settle_compaction()
        elif message.subtype == "compact_boundary":
            self.compaction_settle_pending = False
            self.compacting = False
            out.append(CompactionComplete(_anchor(data, float(self.clock()))))
        elif message.subtype == "api_retry":
            retry = {k: v for k, v in data.items() if k not in _RETRY_NOISE}
            if self.turn_active:
                out += self._chunks(retry_chunk(retry))
            out.append(ApiRetry(retry))
        return out

    def _commands(self, commands: object) -> list[RuntimeEvent]:
        """Slash commands (names, or objects with a ``name``) -> ``SupportedCommands`` on change."""
        if not isinstance(commands, list):
            return []
        names = tuple(str(c.get("name", "")) if isinstance(c, dict) else str(c) for c in commands)
        if names == self.commands:
            return []
        self.commands = names
        return [SupportedCommands(names)]

    def _token(self, session_id: object) -> list[RuntimeEvent]:
        if not isinstance(session_id, str) or not session_id or session_id == self.resume_token:
            return []
        self.resume_token = session_id
        return [ResumeToken(session_id)]

    def _settle_compaction(self, *, ending: bool = False) -> list[RuntimeEvent]:
        """Settle a compaction that succeeded without a boundary (``ending``: the turn or the
        connection ends, so any compaction still open settles now, anchor-less)."""
        if not (self.compaction_settle_pending or (ending and self.compacting)):
            return []
        self.compaction_settle_pending = False
        self.compacting = False
        return [CompactionComplete()]

    def _fail_compaction(self, error: str) -> list[RuntimeEvent]:
        self.compaction_settle_pending = False
        self.compacting = False
        return [CompactionError(error)]

    # -- the end of a turn ------------------------------------------------------------------

    def _result(self, result: ResultMessage) -> list[RuntimeEvent]:
        out = self._settle_compaction(ending=True)
        out += self._token(result.session_id)
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
        if self.compacting or self.compaction_settle_pending:
            out += self._fail_compaction(str(error.get("message") or "the runtime ended"))
        if not self.turn_active:
            return out
        out += self._chunks(*self.steps.close_step())
        undelivered = self.steers.end_turn()
        if undelivered:
            out.append(SteerUndelivered(undelivered))
        self.turn_active = False
        out.append(ErrorEvent(dict(error)))
        return out
