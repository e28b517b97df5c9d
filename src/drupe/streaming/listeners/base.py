"""The listener protocol, the event and terminal values it receives, and their ordering rules.

Contract (reference §2.2, §2.4 step 5):

* ``on_chunk`` is synchronous and must not block or await: it is called on the producer's task
  for every chunk of every execution. A listener that does I/O queues the event and pumps it
  from its own task. A raise is isolated: the listener is removed and logged.
* ``on_done`` / ``on_paused`` / ``on_error`` are awaited once per execution terminal, ordered
  ``persistence`` phase -> unphased -> ``cleanup`` phase. A ``TerminalPersistenceError`` raised by
  a persistence-phase listener suppresses the unphased listeners for that terminal.
* ``is_alive`` false means the manager drops the listener at its next fan-out.

A ``StreamEvent`` is shared by every listener of a fan-out and never mutated; its JSON encoding
is computed once, on first use, and cached.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import orjson

from drupe.chunks.types import Chunk, UIMessage

if TYPE_CHECKING:
    from drupe.chunks.accumulate import Accumulator

__all__ = [
    "BaseListener",
    "Listener",
    "SerializedError",
    "StreamEvent",
    "TerminalPhase",
    "TerminalResult",
    "TerminalStatus",
    "serialize_error",
]

TerminalPhase = Literal["persistence", "cleanup"]
TerminalStatus = Literal["success", "paused", "error"]
SerializedError = dict[str, Any]


class StreamEvent:
    """One chunk as fanned out: identities plus the chunk, with a cached JSON encoding."""

    __slots__ = (
        "_json",
        "accumulator",
        "anchor_message_id",
        "attempt_id",
        "chunk",
        "conversation_id",
        "execution_id",
        "seq",
        "turn_id",
    )

    def __init__(
        self,
        *,
        conversation_id: str,
        turn_id: str,
        execution_id: str,
        attempt_id: int,
        anchor_message_id: str | None,
        seq: int,
        chunk: Chunk,
        accumulator: Accumulator | None = None,
    ) -> None:
        self.conversation_id = conversation_id
        self.turn_id = turn_id
        self.execution_id = execution_id
        self.attempt_id = attempt_id
        self.anchor_message_id = anchor_message_id
        self.seq = seq
        self.chunk = chunk
        self.accumulator = accumulator
        """The execution's own accumulator (every content chunk it published so far, this one
        included) when the event comes from this process's stream, live or replayed; None for
        an event read from another node's log. A listener that needs the message so far reads
        it there instead of keeping a copy."""
        self._json: bytes | None = None

    @property
    def json(self) -> bytes:
        """The chunk encoded as compact JSON (computed once per fan-out)."""
        data = self._json
        if data is None:
            # orjson's result keeps a ~4 KiB buffer; copy it to its own size (held by replays).
            data = self._json = bytes(memoryview(orjson.dumps(self.chunk)))
        return data

    def __repr__(self) -> str:
        return (
            f"StreamEvent(conversation_id={self.conversation_id!r}, seq={self.seq}, "
            f"execution_id={self.execution_id!r}, type={self.chunk.get('type')!r})"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TerminalResult:
    """How one execution ended, with the message it accumulated."""

    status: TerminalStatus
    conversation_id: str
    turn_id: str
    execution_id: str
    model_id: str
    attempt_id: int
    anchor_message_id: str | None
    final_message: UIMessage | None
    is_conversation_done: bool
    """False while the manager keeps the stream open (a sibling still runs, or a chain)."""
    error: SerializedError | None = None
    reason: str | None = None
    """For ``paused``: why (``user-stop``, ``idle-timeout``, ``no-subscribers``, ...)."""
    timings: dict[str, float] = field(default_factory=dict)
    """Monotonic-free wall-clock milliseconds: ``startedAt``, ``firstChunkAt``, ``completedAt``."""


def serialize_error(err: BaseException, *, name: str | None = None) -> SerializedError:
    """Return the ``SerializedError`` dict persisted in ``data-error`` parts (no traceback)."""
    out: SerializedError = {"name": name or type(err).__name__, "message": str(err) or repr(err)}
    status = getattr(err, "status_code", None)
    if isinstance(status, int):
        out["statusCode"] = status
    body = getattr(err, "body", None)
    if isinstance(body, str | dict | list):
        out["responseBody"] = body
    return out


@runtime_checkable
class Listener(Protocol):
    """A consumer of one conversation's stream."""

    listener_id: str
    terminal_phase: TerminalPhase | None

    def on_chunk(self, event: StreamEvent) -> None:
        """Take one chunk. Never blocks, never awaits; may raise (the listener is removed)."""

    async def on_done(self, result: TerminalResult) -> None:
        """An execution ended successfully. Awaited once per execution terminal."""

    async def on_paused(self, result: TerminalResult) -> None:
        """An execution was stopped (user stop, idle timeout, no subscribers, shutdown)."""

    async def on_error(self, result: TerminalResult) -> None:
        """An execution failed; ``result.error`` says how."""

    def is_alive(self) -> bool:
        """False once the listener should be dropped (its tab or response is gone)."""


class BaseListener:
    """A listener with no-op callbacks; subclasses override what they need."""

    terminal_phase: TerminalPhase | None = None

    def __init__(self, listener_id: str) -> None:
        self.listener_id = listener_id

    def on_chunk(self, event: StreamEvent) -> None:
        return None

    async def on_done(self, result: TerminalResult) -> None:
        return None

    async def on_paused(self, result: TerminalResult) -> None:
        return None

    async def on_error(self, result: TerminalResult) -> None:
        return None

    def is_alive(self) -> bool:
        return True
