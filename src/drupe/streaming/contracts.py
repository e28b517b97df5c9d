"""The values the stream manager takes and returns, and its callback types.

Kept apart from ``manager`` so callers (dispatch, providers, the agent-session host, the HTTP
edge) can name them without reading the orchestrator. All frozen values except the status
record, which the manager updates in place.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from drupe.chunks.types import UIMessage
from drupe.streaming.listeners.base import Listener, SerializedError
from drupe.streaming.live import SourceFactory
from drupe.streaming.steering import PendingSteer

__all__ = [
    "AttachFinished",
    "AttachNotFound",
    "AttachResult",
    "Attached",
    "ExecutionSpec",
    "HoldPolicy",
    "Injected",
    "SendInput",
    "SendResult",
    "Started",
    "StatusObserver",
    "StatusRecord",
    "SteerLauncher",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionSpec:
    """One model to run in a turn."""

    model_id: str
    source: SourceFactory
    """Called once, in the execution's task, to open the chunk stream."""
    anchor_message_id: str | None = None
    """The placeholder row this execution finalizes (None for headless prompt streams)."""
    seed_message: UIMessage | None = None
    """An assistant message the chunks continue (approval continuation)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SendInput:
    conversation_id: str
    executions: Sequence[ExecutionSpec] = ()
    listeners: Sequence[Listener] = ()
    siblings_group_id: int | None = None
    persistent: bool = True
    grace_period: float | None = None
    """Seconds the ended stream stays attachable; None: the manager's ``grace_period``."""


@dataclass(frozen=True, slots=True)
class Started:
    mode: Literal["started"]
    turn_id: str
    execution_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Injected:
    mode: Literal["injected"]
    turn_id: str | None
    execution_ids: tuple[str, ...]


SendResult = Started | Injected


@dataclass(frozen=True, slots=True)
class AttachNotFound:
    kind: Literal["not-found"] = "not-found"


@dataclass(frozen=True, slots=True)
class AttachFinished:
    status: str
    turn_id: str
    final_messages: dict[str, UIMessage]
    error: SerializedError | None = None
    kind: Literal["finished"] = "finished"


@dataclass(frozen=True, slots=True)
class Attached:
    turn_id: str
    replayed: int
    execution_ids: tuple[str, ...]
    kind: Literal["attached"] = "attached"


AttachResult = AttachNotFound | AttachFinished | Attached


@dataclass(slots=True)
class StatusRecord:
    """The conversation status mirror; kept after eviction (reference ``ChatStreamLifecycle``)."""

    status: str
    turn_id: str
    last_completed_at: float | None = None


SteerLauncher = Callable[[str, PendingSteer, Sequence[Listener]], Awaitable[None]]
HoldPolicy = Callable[[str], bool]
"""``policy(conversation_id)``: keep a finished stream open for a runtime-driven successor."""
StatusObserver = Callable[[str, StatusRecord], None]
