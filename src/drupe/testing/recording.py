"""``RecordingListener``: a listener that keeps everything it is given (tests, demos, benches).

It records every ``StreamEvent`` and every terminal result, can play dead (``alive = False``)
or raise on demand, and offers waits that return once a terminal arrived, so tests never sleep.
"""

from __future__ import annotations

import anyio

from drupe.chunks.accumulate import accumulate
from drupe.chunks.types import Chunk, UIMessage
from drupe.streaming.listeners.base import BaseListener, StreamEvent, TerminalPhase, TerminalResult

__all__ = ["RecordingBackend", "RecordingListener"]


class RecordingListener(BaseListener):
    """Records chunks and terminal results; ``wait_done`` waits for the conversation's end."""

    def __init__(
        self,
        listener_id: str = "recorder",
        *,
        terminal_phase: TerminalPhase | None = None,
        raise_on_chunk: bool = False,
    ) -> None:
        super().__init__(listener_id)
        self.terminal_phase = terminal_phase
        self.events: list[StreamEvent] = []
        self.terminals: list[TerminalResult] = []
        self.alive = True
        self.raise_on_chunk = raise_on_chunk
        self._done = anyio.Event()

    # --- listener protocol --------------------------------------------------------------------

    def on_chunk(self, event: StreamEvent) -> None:
        if self.raise_on_chunk:
            raise RuntimeError(f"{self.listener_id} was told to raise")
        self.events.append(event)

    async def on_done(self, result: TerminalResult) -> None:
        self._record(result)

    async def on_paused(self, result: TerminalResult) -> None:
        self._record(result)

    async def on_error(self, result: TerminalResult) -> None:
        self._record(result)

    def is_alive(self) -> bool:
        return self.alive

    def _record(self, result: TerminalResult) -> None:
        self.terminals.append(result)
        if result.is_conversation_done:
            self._done.set()

    # --- inspection -----------------------------------------------------------------------------

    def chunks(self, execution_id: str | None = None) -> list[Chunk]:
        """The chunks received, optionally of one execution only."""
        return [
            e.chunk for e in self.events if execution_id is None or e.execution_id == execution_id
        ]

    def message(self, execution_id: str | None = None) -> UIMessage:
        """What a client that saw these chunks would rebuild (``readUIMessageStream``)."""
        return accumulate(self.chunks(execution_id))

    def statuses(self) -> list[str]:
        return [t.status for t in self.terminals]

    async def wait_done(self) -> TerminalResult:
        """Wait for the terminal that ends the conversation's turn and return it."""
        await self._done.wait()
        return next(t for t in reversed(self.terminals) if t.is_conversation_done)


class RecordingBackend:
    """A persistence backend that keeps terminal writes in memory (tests and demos)."""

    kind = "memory"
    checkpoint_target = None

    def __init__(self, *, persists_empty_terminal: bool = False, fail: bool = False) -> None:
        self.persists_empty_terminal = persists_empty_terminal
        self.fail = fail
        self.writes: list[tuple[str, UIMessage, str | None]] = []
        self.marked_error = 0

    async def persist_assistant(
        self, *, message: UIMessage, status: str, model_id: str | None, stats: object
    ) -> None:
        if self.fail:
            raise OSError("the disk is full")
        self.writes.append((status, message, model_id))

    async def mark_terminal_error(self) -> bool:
        self.marked_error += 1
        return True
