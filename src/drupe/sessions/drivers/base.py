"""The driver contract: how the agent-session host talks to one agent runtime (reference §6.1).

A ``Driver`` opens ``Connection``s. A connection is one live link to the runtime for one agent
session: the host sends user input, reads ``RuntimeEvent``s, and may steer it. The host never
knows whether the runtime is a subprocess, a websocket or an in-process loop.

Contract:
* ``Driver.connect`` may block on I/O (spawning, handshakes); it raises ``DriverError``.
* ``Connection.events()`` is iterated by exactly ONE task (the host's reader) for the whole life
  of the connection; it ends when the connection closes. Events of a turn arrive in order:
  chunks, then ``turn-complete`` or ``error``. A turn the runtime starts by itself (no ``send``)
  is announced by ``runtime-turn-start`` before its chunks.
* ``send`` starts a turn with one user input; the host calls it at most once per turn.
* A driver declares what its connections can do beyond this contract in ``capabilities``
  (``Capabilities``); the host checks it and never probes a connection for a method.
* Steering (``capabilities.steer``; the connections are ``SteerableConnection``s):
  ``await redirect(input)`` returns True when
  the runtime folded the message into the running turn (it will later emit ``steer-boundary``
  before the content that answers it, or ``steer-undelivered`` if the turn ended first), False
  when it cannot take it now (the host then queues it as the next turn).
* ``reconcile(target)`` compares the live connection with the wanted configuration and returns a
  verdict; it must not close the connection itself.
* ``respond_approval`` resolves an in-place approval the driver holds (agent approvals).
* ``close`` is idempotent and never raises.
* Context usage (``capabilities.context_usage``): ``await context_usage()`` returns the
  session's context-window usage on request (the host asks at most once per turn, and only
  when someone reads it); a driver whose usage is free may also emit ``context-usage`` events.
* A driver that can run turns no human watches (scheduled tasks, heartbeats) declares
  ``capabilities.headless_runs`` (``runs_headless``); approvals in such turns are denied at once.
* ``capabilities.idle_hook``: the driver has ``on_session_idle(session_id)`` (e.g. a prewarm).
Drivers are registered explicitly (``registry.DriverRegistry``), never as an import side effect.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from drupe.chunks.types import Chunk, UIMessage

__all__ = [
    "ApiRetry",
    "Capabilities",
    "ContextUsageConnection",
    "IdleHookDriver",
    "SteerableConnection",
    "runs_headless",
    "ApprovalRequest",
    "ChunkEvent",
    "CompactionAnchor",
    "CompactionComplete",
    "CompactionError",
    "CompactionStart",
    "ConnectInput",
    "ConnectTarget",
    "Connection",
    "ContextUsage",
    "Driver",
    "ErrorEvent",
    "ReconcileVerdict",
    "ResumeToken",
    "RuntimeEvent",
    "RuntimeTurnStart",
    "SessionInfo",
    "SteerBoundary",
    "SteerUndelivered",
    "SupportedCommands",
    "ToolApprovalRequest",
    "TraceContext",
    "TurnComplete",
    "UsageEvent",
    "UserInput",
]

ReconcileVerdict = Literal["current", "patched", "rebuild", "invalid", "failed"]
PermissionMode = Literal["default", "accept-edits", "plan", "bypass"]


@dataclass(frozen=True, slots=True, kw_only=True)
class UserInput:
    """One user message for the runtime."""

    message: UIMessage
    system_reminder: bool = False
    """Wrap the text as a steer ``<system-reminder>`` (a message sent while the agent worked)."""
    headless: bool = False
    """No human can answer approvals for this input (scheduled task, IM channel)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    """What a driver needs to know about the session and its agent."""

    session_id: str
    agent_id: str
    agent_name: str
    driver_type: str
    model_id: str
    instructions: str | None = None
    workspace: Path | None = None
    tools: tuple[str, ...] = ()
    mcp_servers: tuple[str, ...] = ()
    permission_mode: PermissionMode = "default"
    settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceContext:
    conversation_id: str
    turn_id: str | None = None
    traceparent: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectTarget:
    """The configuration a connection should have (frozen for the length of a turn)."""

    model_id: str
    instructions: str | None = None
    tools: tuple[str, ...] = ()
    mcp_servers: tuple[str, ...] = ()
    permission_mode: PermissionMode = "default"

    @classmethod
    def of(cls, session: SessionInfo) -> ConnectTarget:
        return cls(
            model_id=session.model_id,
            instructions=session.instructions,
            tools=session.tools,
            mcp_servers=session.mcp_servers,
            permission_mode=session.permission_mode,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectInput:
    session: SessionInfo
    model_id: str
    resume_token: str | None = None
    trace: TraceContext | None = None


# --- runtime events ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChunkEvent:
    chunk: Chunk
    type: Literal["chunk"] = "chunk"


@dataclass(frozen=True, slots=True)
class ResumeToken:
    token: str
    type: Literal["resume-token"] = "resume-token"


@dataclass(frozen=True, slots=True)
class TurnComplete:
    fork_anchor: str | None = None
    type: Literal["turn-complete"] = "turn-complete"


@dataclass(frozen=True, slots=True)
class SteerUndelivered:
    inputs: tuple[UserInput, ...]
    type: Literal["steer-undelivered"] = "steer-undelivered"


@dataclass(frozen=True, slots=True)
class SteerBoundary:
    inputs: tuple[UserInput, ...]
    type: Literal["steer-boundary"] = "steer-boundary"


@dataclass(frozen=True, slots=True)
class CompactionStart:
    trigger: Literal["auto", "manual"] | None = None
    type: Literal["compaction-start"] = "compaction-start"


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionAnchor:
    trigger: Literal["auto", "manual"]
    completed_at: float
    pre_tokens: int
    post_tokens: int | None = None
    duration_ms: float | None = None


@dataclass(frozen=True, slots=True)
class CompactionComplete:
    anchor: CompactionAnchor | None = None
    type: Literal["compaction-complete"] = "compaction-complete"


@dataclass(frozen=True, slots=True)
class CompactionError:
    error: str
    type: Literal["compaction-error"] = "compaction-error"


@dataclass(frozen=True, slots=True)
class ContextUsage:
    usage: Mapping[str, Any]
    type: Literal["context-usage"] = "context-usage"


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    error: Mapping[str, Any]
    """A serialized error: ``{name, message, statusCode?}``."""
    type: Literal["error"] = "error"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequest:
    approval_id: str
    tool_call_id: str
    tool_name: str
    input: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolApprovalRequest:
    request: ApprovalRequest
    type: Literal["tool-approval-request"] = "tool-approval-request"


@dataclass(frozen=True, slots=True)
class UsageEvent:
    invocation: Mapping[str, Any]
    type: Literal["usage"] = "usage"


@dataclass(frozen=True, slots=True)
class ApiRetry:
    retry: Mapping[str, Any]
    type: Literal["api-retry"] = "api-retry"


@dataclass(frozen=True, slots=True)
class RuntimeTurnStart:
    """The runtime began a turn by itself (no user input; e.g. the CLI reporting a background
    subagent's result). The chunks that follow, up to its ``turn-complete``/``error``, are that
    turn's answer: the host gives it a new assistant row."""

    type: Literal["runtime-turn-start"] = "runtime-turn-start"


@dataclass(frozen=True, slots=True)
class SupportedCommands:
    commands: tuple[str, ...]
    type: Literal["supported-commands"] = "supported-commands"


RuntimeEvent = (
    ChunkEvent
    | ResumeToken
    | TurnComplete
    | SteerUndelivered
    | SteerBoundary
    | CompactionStart
    | CompactionComplete
    | CompactionError
    | ContextUsage
    | ErrorEvent
    | ToolApprovalRequest
    | UsageEvent
    | ApiRetry
    | SupportedCommands
    | RuntimeTurnStart
)


# --- protocols -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Capabilities:
    """What a driver's connections can do beyond the base contract (declared, never probed)."""

    steer: bool = False
    """Connections take a steer into a running turn (``SteerableConnection.redirect``)."""
    context_usage: bool = False
    """Connections answer ``context_usage()`` (``ContextUsageConnection``)."""
    headless_runs: bool = False
    """Turns no human watches (scheduled tasks, heartbeats) may run on this runtime."""
    idle_hook: bool = False
    """The driver has ``on_session_idle`` (``IdleHookDriver``)."""


@runtime_checkable
class Connection(Protocol):
    """One live link to an agent runtime for one session."""

    def events(self) -> AsyncIterator[RuntimeEvent]:
        """The runtime's events; iterated by one task; ends when the connection closes."""
        ...

    async def send(self, user_input: UserInput) -> None:
        """Start a turn with ``user_input``. May raise ``DriverError``."""
        ...

    async def reconcile(self, target: ConnectTarget) -> ReconcileVerdict:
        """Compare with ``target``: current, patched (hot-applied), rebuild, invalid, failed."""
        ...

    async def respond_approval(
        self, approval_id: str, *, approved: bool, reason: str | None = None
    ) -> bool:
        """Resolve an in-place approval; False when the id is unknown (already resolved)."""
        ...

    async def close(self) -> None:
        """Tear the link down. Idempotent; never raises."""
        ...


class SteerableConnection(Connection, Protocol):
    """A connection that can take a steer into its running turn (``redirect`` present)."""

    async def redirect(self, user_input: UserInput) -> bool:
        """Fold ``user_input`` into the running turn; False when it cannot take it now."""
        ...


class ContextUsageConnection(Connection, Protocol):
    """A connection that reports the session's context-window usage on request."""

    async def context_usage(self) -> dict[str, Any] | None:
        """The usage (at least ``totalTokens``), or None when unavailable."""
        ...


@runtime_checkable
class Driver(Protocol):
    """An agent runtime kind (``claude-code``, ``inprocess``)."""

    type: str
    capabilities: Capabilities

    def validate_session(self, session: SessionInfo) -> None:
        """Raise ``ValidationError`` when the session cannot run (e.g. no usable workspace)."""
        ...

    async def connect(self, connect_input: ConnectInput) -> Connection:
        """Open a connection. May block on I/O; raises ``DriverError``."""
        ...


class IdleHookDriver(Driver, Protocol):
    """A driver told when a session's connection was closed for idleness."""

    async def on_session_idle(self, session_id: str) -> None: ...


def runs_headless(driver: Driver) -> bool:
    """Whether ``driver`` declares ``capabilities.headless_runs`` (scheduled tasks may use it)."""
    return driver.capabilities.headless_runs
