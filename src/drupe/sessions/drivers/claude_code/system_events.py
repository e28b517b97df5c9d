"""The Claude Code CLI's ``system`` messages -> runtime events (part of the translation).

Owns: ``SystemTracker``, the per-connection state those messages update (the resume token, the
slash commands, an open compaction), and ``retry_chunk``. ``Translator`` (``events.py``) feeds it
every ``SystemMessage`` and asks it to settle a compaction at a model call or a result.
Mapping (reference §6.8):

* ``system/init`` -> ``ResumeToken`` only when the session id changes (init comes every turn);
  its ``slash_commands`` (and ``commands_changed``) -> ``SupportedCommands`` when they change;
* ``status: compacting`` -> ``CompactionStart``; ``compact_boundary`` -> ``CompactionComplete``
  with an anchor; ``compact_result: success`` with no boundary before the next model call or the
  result -> anchor-less ``CompactionComplete`` (``settle_compaction``); a compaction still open
  at the result settles anchor-less too, and one open when the runtime dies fails (exactly one
  end per compaction); ``compact_result: failed``, or a ``compact_error`` without
  ``compact_result: success``, -> ``CompactionError``;
* ``api_retry`` -> a transient ``data-retry`` chunk (the agent loop's shape: the try that comes
  next, of ``max_retries + 1``) during a turn, and ``ApiRetry``.

Must never: do I/O, or raise on an unknown message (unknown subtypes produce nothing).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from claude_agent_sdk import SystemMessage

from drupe.chunks.types import Chunk
from drupe.sessions.drivers.base import (
    ApiRetry,
    ChunkEvent,
    CompactionAnchor,
    CompactionComplete,
    CompactionError,
    CompactionStart,
    ResumeToken,
    RuntimeEvent,
    SupportedCommands,
)

__all__ = ["SystemTracker", "retry_chunk"]

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
class SystemTracker:
    """The state ``system`` messages update; ``system`` maps one message to runtime events."""

    resume_token: str | None = None
    clock: Callable[[], float] = time.time
    commands: tuple[str, ...] | None = None
    compacting: bool = False
    """A compaction started (``status: compacting``) and has not ended yet."""
    settle_pending: bool = False
    """A compaction succeeded without a boundary: it settles at the next model call."""

    def system(self, message: SystemMessage, *, turn_active: bool) -> list[RuntimeEvent]:
        """The events of one ``SystemMessage`` (``turn_active``: a turn is running)."""
        data = message.data
        out: list[RuntimeEvent] = []
        if message.subtype == "init":
            out += self.token(data.get("session_id"))
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
                out += self.fail_compaction(str(error or "compaction failed"))
            elif result == "success":
                self.settle_pending = True
            elif data.get("status") == "requesting":
                out += self.settle_compaction()
        elif message.subtype == "compact_boundary":
            self.settle_pending = False
            self.compacting = False
            out.append(CompactionComplete(_anchor(data, float(self.clock()))))
        elif message.subtype == "api_retry":
            retry = {k: v for k, v in data.items() if k not in _RETRY_NOISE}
            if turn_active:
                out.append(ChunkEvent(retry_chunk(retry)))
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

    def token(self, session_id: object) -> list[RuntimeEvent]:
        """``ResumeToken`` when ``session_id`` is a new session id."""
        if not isinstance(session_id, str) or not session_id or session_id == self.resume_token:
            return []
        self.resume_token = session_id
        return [ResumeToken(session_id)]

    def settle_compaction(self, *, ending: bool = False) -> list[RuntimeEvent]:
        """Settle a compaction that succeeded without a boundary (``ending``: the turn or the
        connection ends, so any compaction still open settles now, anchor-less)."""
        if not (self.settle_pending or (ending and self.compacting)):
            return []
        self.settle_pending = False
        self.compacting = False
        return [CompactionComplete()]

    def fail_compaction(self, error: str) -> list[RuntimeEvent]:
        """End an open compaction with ``CompactionError``."""
        self.settle_pending = False
        self.compacting = False
        return [CompactionError(error)]
