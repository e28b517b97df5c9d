"""The agent-session host's state, events and effects (the reference's "2b" shape, §6.6).

Values only: ``drupe.sessions.reducer.reduce(state, event) -> (state, effects)`` decides, the
shell (``drupe.sessions.host``) feeds it events (``drupe.sessions.session_events``) and performs
the effects (defined here, after the state).

State:
* ``execution``: ``Idle`` | ``TurnExec`` (one turn: stream phase ``unopened -> open ->
  awaiting-persistence``, admission ``pending -> admitted``, a latched runtime terminal, a
  buffer of chunks that arrived before the stream opened, the steers folded into it) |
  ``Transition`` (the steer-boundary roll: the source turn A1a is closing, chunks are buffered
  for the continuation A2);
* ``queue``: follow-ups waiting for their own turn;
* ``launch``: ``idle`` | ``scheduled`` | ``running``, target ``queued-turn``,
  ``steer-continuation`` or ``runtime-turn`` (a turn the runtime started by itself: its
  ``TurnExec`` exists at once, buffering, while its row is saved; single-flight: at most one
  launch per session);
* ``waiting``: runtime turns (``TurnExec``, pre-admitted) the runtime began while the session
  was busy (typically while the previous turn was still being persisted): their chunks and
  terminal are buffered in them; the first becomes the execution, ahead of the queue (the
  runtime is already answering it), as soon as the session is idle;
* ``connection``: ``disconnected`` | ``connecting`` | ``connected`` with the attempt id;
* ``compacting`` and ``last_terminal``.

Bounds: a buffer holds at most ``buffer_limit`` chunks; one more latches an ``error`` terminal
(``BufferOverflow``, delivered when the stream opens), drops the chunk and closes the
connection, so the overflow ends the turn visibly instead of growing memory.

Rules: a session is busy while compacting, launching, queueing or executing (never "is a stream
live"). Only ``TurnTerminal`` (persistence confirmed) returns the execution to idle, and only
then may a successor launch. A chunk is routed to exactly one place: the open turn, a buffer,
or (no live turn) dropped with a log. Buffers are delivered once, in order, before live chunks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from drupe.chunks.types import Chunk, UIMessage

__all__ = [
    "CloseConnection",
    "CloseStream",
    "DeliverBuffer",
    "DropBuffer",
    "DropQueued",
    "Effect",
    "Forward",
    "FollowUp",
    "Idle",
    "LogInvalid",
    "ScheduleLaunch",
    "SessionOnIdle",
    "SessionState",
    "TerminateHeld",
    "Transition",
    "TurnExec",
    "TurnInfo",
    "TurnConfig",
    "can_redirect",
    "is_busy",
    "turn_config",
    "will_continue",
]

Status = Literal["success", "paused", "error"]
LaunchTarget = Literal["queued-turn", "steer-continuation", "runtime-turn"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnConfig:
    """A turn's frozen configuration; a follow-up with an equal one may be redirected."""

    model_id: str
    extra: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class FollowUp:
    """A persisted user row waiting to be answered (queued, or folded into a turn)."""

    user_message_id: str
    message: UIMessage
    config: TurnConfig
    steer: bool = True
    headless: bool = False
    seq: int = 0
    """Submission order: a follow-up handed back by the runtime regains its place by it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnInfo:
    turn_id: str
    assistant_message_id: str
    user_message_id: str
    config: TurnConfig
    message: UIMessage
    headless: bool = False
    pre_admitted: bool = False
    """A steer continuation: the runtime is already answering; nothing is sent."""
    steer: bool = False
    runtime: bool = False
    """A turn the runtime started by itself: no user row, nothing is sent (pre-admitted)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnExec:
    turn: TurnInfo
    phase: Literal["unopened", "open", "awaiting-persistence"] = "unopened"
    admission: Literal["pending", "admitted"] = "pending"
    terminal: tuple[Status, Mapping[str, Any] | None] | None = None
    """A runtime terminal that arrived before the stream opened (latched)."""
    buffer: tuple[Chunk, ...] = ()
    folded: tuple[FollowUp, ...] = ()
    """Follow-ups redirected into this turn and not yet answered or handed back."""
    kind: Literal["turn"] = "turn"


@dataclass(frozen=True, slots=True, kw_only=True)
class Transition:
    """The roll A1a -> A2: A1a is closing; chunks wait for A2."""

    source: TurnInfo
    source_settled: bool = False
    inputs: tuple[FollowUp, ...]
    buffer: tuple[Chunk, ...] = ()
    headless: bool = False
    terminal: tuple[Status, Mapping[str, Any] | None] | None = None
    folded: tuple[FollowUp, ...] = ()
    kind: Literal["steer-transition"] = "steer-transition"


@dataclass(frozen=True, slots=True)
class Idle:
    kind: Literal["idle"] = "idle"


Execution = Idle | TurnExec | Transition


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionState:
    execution: Execution = Idle()
    queue: tuple[FollowUp, ...] = ()
    launch: Literal["idle", "scheduled", "running"] = "idle"
    launch_target: LaunchTarget | None = None
    waiting: tuple[TurnExec, ...] = ()
    """Runtime turns begun while the session was busy, oldest first (see the module docstring);
    only the newest may still be receiving chunks."""
    connection: Literal["disconnected", "connecting", "connected"] = "disconnected"
    attempt: int = 0
    compacting: bool = False
    last_terminal: Status | None = None
    buffer_limit: int = 10_000
    """The most chunks a buffer (before a stream opens, or during a roll) holds; the next one
    ends the turn ``error`` (``BufferOverflow``) and closes the connection."""


# --- effects -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Forward:
    turn_id: str
    chunk: Chunk


@dataclass(frozen=True, slots=True)
class DeliverBuffer:
    turn_id: str
    chunks: tuple[Chunk, ...]


@dataclass(frozen=True, slots=True)
class CloseStream:
    """End the turn's chunk stream with this outcome (the manager then persists it)."""

    turn_id: str
    status: Status
    error: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ScheduleLaunch:
    target: LaunchTarget


@dataclass(frozen=True, slots=True)
class TerminateHeld:
    error: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class DropQueued:
    items: tuple[FollowUp, ...]
    reason: str


@dataclass(frozen=True, slots=True)
class DropBuffer:
    chunks: tuple[Chunk, ...]
    reason: str


@dataclass(frozen=True, slots=True)
class CloseConnection:
    reason: str


@dataclass(frozen=True, slots=True)
class SessionOnIdle:
    pass


@dataclass(frozen=True, slots=True)
class LogInvalid:
    event: str
    reason: str


Effect = (
    Forward
    | DeliverBuffer
    | CloseStream
    | ScheduleLaunch
    | TerminateHeld
    | DropQueued
    | DropBuffer
    | CloseConnection
    | SessionOnIdle
    | LogInvalid
)
Result = tuple[SessionState, list[Effect]]


# --- queries -------------------------------------------------------------------------------


def is_busy(state: SessionState) -> bool:
    """Whether a new submit must be queued rather than begun (reference §6.3 step 5)."""
    return (
        state.compacting
        or state.launch != "idle"
        or bool(state.queue)
        or not isinstance(state.execution, Idle)
    )


def will_continue(state: SessionState) -> bool:
    """Whether a finished ``done`` stream must be held open for a runtime-driven successor."""
    return (
        state.compacting
        or bool(state.queue)
        or bool(state.waiting)
        or state.launch != "idle"
        or isinstance(state.execution, Transition)
    )


def can_redirect(state: SessionState, config: TurnConfig) -> str | None:
    """The turn id a follow-up with ``config`` may be redirected into, or None (queue it)."""
    execution = state.execution
    if (
        isinstance(execution, TurnExec)
        and execution.phase == "open"
        and execution.admission == "admitted"
        and execution.terminal is None
        and not execution.turn.headless
        and execution.turn.config == config
        and not state.queue
    ):
        return execution.turn.turn_id
    return None


def turn_config(model_id: str, **extra: Any) -> TurnConfig:
    """A frozen turn configuration from plain values (keys sorted)."""
    return TurnConfig(model_id=model_id, extra=tuple(sorted(extra.items())))
