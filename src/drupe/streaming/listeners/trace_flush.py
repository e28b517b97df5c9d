"""``TraceFlushListener``: flush a conversation's spans after each execution terminal (§9).

A cleanup-phase listener the stream manager adds to every stream it starts (through a listener
factory wired by the composition root). At ``done``/``paused``/``error`` it calls
``schedule(conversation_id)``, which only queues the flush (the trace recorder's own task
writes it), so the terminal never waits on I/O; the ``ai.turn`` span and its children have
ended by then. A ``schedule`` that raises only logs a warning: tracing never changes a turn.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from drupe.streaming.listeners.base import BaseListener, TerminalPhase, TerminalResult

__all__ = ["TraceFlushListener"]

log = logging.getLogger(__name__)


class TraceFlushListener(BaseListener):
    terminal_phase: TerminalPhase | None = "cleanup"

    def __init__(self, conversation_id: str, schedule: Callable[[str], None]) -> None:
        super().__init__(f"trace-flush:{conversation_id}")
        self.conversation_id = conversation_id
        self._schedule = schedule

    async def _terminal(self, result: TerminalResult) -> None:
        try:
            self._schedule(result.conversation_id)
        except Exception as err:  # isolation boundary: a failed flush only warns
            log.warning("trace flush of %r failed: %s", result.conversation_id, err)

    async def on_done(self, result: TerminalResult) -> None:
        await self._terminal(result)

    async def on_paused(self, result: TerminalResult) -> None:
        await self._terminal(result)

    async def on_error(self, result: TerminalResult) -> None:
        await self._terminal(result)
