"""The events the session reducer folds: what happened to an agent session, as values.

Each is a frozen value; ``Event`` is their union, and ``drupe.sessions.reducer.reduce`` has one
handler per event type. Turn events (``TurnCreated``, ``RuntimeTurnStarted``,
``TurnStreamOpened``, ``TurnAdmitted``, ``TurnTerminal``), runtime events (``RuntimeChunk``,
``RuntimeTerminal``, the steer boundary and undelivered steers), follow-ups
(``QueueFollowUp``, ``RedirectAccepted``), launches, compaction, a user stop, the idle TTL and
the connection's lifecycle. The host and its helpers create them; the reducer decides what they
mean. The state and the effects are in ``drupe.sessions.state``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from drupe.chunks.types import Chunk
from drupe.sessions.state import FollowUp, LaunchTarget, Status, TurnInfo

__all__ = [
    "CompactionEnded",
    "CompactionStarted",
    "ConnectionLost",
    "ConnectionOpened",
    "ConnectionStarted",
    "Event",
    "IdleExpired",
    "LaunchAbandoned",
    "LaunchFailed",
    "LaunchStarted",
    "QueueFollowUp",
    "RedirectAccepted",
    "RuntimeChunk",
    "RuntimeTerminal",
    "RuntimeTurnStarted",
    "SteerBoundaryReached",
    "SteerUndeliveredInputs",
    "Stopped",
    "TurnAdmitted",
    "TurnCreated",
    "TurnStreamOpened",
    "TurnTerminal",
]


@dataclass(frozen=True, slots=True)
class TurnCreated:
    """A turn exists (fresh begin, a launched queued turn, or the roll's continuation)."""

    turn: TurnInfo
    via: Literal["fresh", "queued-turn", "steer-continuation", "runtime-turn"] = "fresh"


@dataclass(frozen=True, slots=True)
class RuntimeTurnStarted:
    """The runtime began a turn by itself; ``turn`` is its (runtime, pre-admitted) turn."""

    turn: TurnInfo


@dataclass(frozen=True, slots=True)
class TurnStreamOpened:
    turn_id: str


@dataclass(frozen=True, slots=True)
class TurnAdmitted:
    turn_id: str


@dataclass(frozen=True, slots=True)
class RuntimeChunk:
    chunk: Chunk


@dataclass(frozen=True, slots=True)
class RuntimeTerminal:
    status: Status
    error: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class TurnTerminal:
    """Persistence confirmed the turn's terminal (the terminal listener)."""

    turn_id: str
    status: Status


@dataclass(frozen=True, slots=True)
class QueueFollowUp:
    item: FollowUp


@dataclass(frozen=True, slots=True)
class RedirectAccepted:
    turn_id: str
    item: FollowUp


@dataclass(frozen=True, slots=True)
class SteerBoundaryReached:
    user_message_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SteerUndeliveredInputs:
    user_message_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LaunchStarted:
    target: LaunchTarget


@dataclass(frozen=True, slots=True)
class LaunchAbandoned:
    """A running launch found nothing to start any more (stopped meanwhile)."""

    target: LaunchTarget


@dataclass(frozen=True, slots=True)
class LaunchFailed:
    target: LaunchTarget
    clear_queue: bool
    error: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class CompactionStarted:
    pass


@dataclass(frozen=True, slots=True)
class CompactionEnded:
    anchor: Chunk | None = None
    """A ``data-compaction-anchor`` chunk to inject into the live turn."""


@dataclass(frozen=True, slots=True)
class Stopped:
    """The user stopped the session (the turn's stream was cancelled)."""

    keep_queue: bool = False


@dataclass(frozen=True, slots=True)
class IdleExpired:
    pass


@dataclass(frozen=True, slots=True)
class ConnectionStarted:
    attempt: int


@dataclass(frozen=True, slots=True)
class ConnectionOpened:
    attempt: int


@dataclass(frozen=True, slots=True)
class ConnectionLost:
    attempt: int


Event = (
    TurnCreated
    | RuntimeTurnStarted
    | TurnStreamOpened
    | TurnAdmitted
    | RuntimeChunk
    | RuntimeTerminal
    | TurnTerminal
    | QueueFollowUp
    | RedirectAccepted
    | SteerBoundaryReached
    | SteerUndeliveredInputs
    | LaunchStarted
    | LaunchAbandoned
    | LaunchFailed
    | CompactionStarted
    | CompactionEnded
    | Stopped
    | IdleExpired
    | ConnectionStarted
    | ConnectionOpened
    | ConnectionLost
)
