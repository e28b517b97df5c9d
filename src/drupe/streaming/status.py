"""Pure reducer: execution statuses -> conversation status (reference §2.3).

``reduce(state, event) -> (state, effects)`` never performs I/O. The only effect is
``StatusChanged``: the shell broadcasts it. Rules:

* a stream is created ``pending``; the first chunk of any execution flips it to ``streaming``
  once (an execution that errors before any chunk does not move it);
* *compute*: any execution still streaming -> stay ``pending`` if pending, else ``streaming``;
  else every execution aborted -> ``aborted``; else any error -> ``error``; else ``done``;
* *resolve* (done / paused terminals): when compute gives ``done`` or ``aborted`` and some
  execution still has a pending approval -> ``awaiting-approval``;
* the error terminal clears that execution's approvals and uses *compute* only; the paused
  terminal clears them before *resolve*;
* an explicit abort flips the conversation to ``aborted`` synchronously.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal, assert_never

__all__ = [
    "LIVE_STATUSES",
    "Abort",
    "ApprovalRequested",
    "ApprovalResolved",
    "ChunkSeen",
    "ConversationStatus",
    "ExecutionStatus",
    "ExecutionTerminal",
    "StatusChanged",
    "StatusEvent",
    "StatusState",
    "compute_status",
    "initial_state",
    "reduce",
    "resolve_status",
]

ConversationStatus = Literal[
    "pending", "streaming", "done", "aborted", "awaiting-approval", "error"
]
ExecutionStatus = Literal["streaming", "done", "error", "aborted"]
LIVE_STATUSES: frozenset[str] = frozenset(("pending", "streaming"))


@dataclass(frozen=True, slots=True)
class StatusState:
    status: ConversationStatus
    executions: Mapping[str, ExecutionStatus]
    approvals: Mapping[str, frozenset[str]] = field(default_factory=dict)
    seen_chunk: bool = False


@dataclass(frozen=True, slots=True)
class ChunkSeen:
    execution_id: str


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    execution_id: str
    tool_call_id: str


@dataclass(frozen=True, slots=True)
class ApprovalResolved:
    execution_id: str
    tool_call_id: str


@dataclass(frozen=True, slots=True)
class ExecutionTerminal:
    execution_id: str
    outcome: Literal["done", "paused", "error"]


@dataclass(frozen=True, slots=True)
class Abort:
    """An explicit stop of every streaming execution (synchronous flip)."""


StatusEvent = ChunkSeen | ApprovalRequested | ApprovalResolved | ExecutionTerminal | Abort


@dataclass(frozen=True, slots=True)
class StatusChanged:
    previous: ConversationStatus
    status: ConversationStatus


def initial_state(execution_ids: list[str]) -> StatusState:
    """Return the state of a freshly started stream: ``pending``, every execution streaming."""
    return StatusState(status="pending", executions=dict.fromkeys(execution_ids, "streaming"))


def compute_status(
    current: ConversationStatus, executions: Mapping[str, ExecutionStatus]
) -> ConversationStatus:
    """The reference *compute* rule."""
    statuses = executions.values()
    if any(s == "streaming" for s in statuses):
        return "pending" if current == "pending" else "streaming"
    if statuses and all(s == "aborted" for s in statuses):
        return "aborted"
    if any(s == "error" for s in statuses):
        return "error"
    return "done"


def resolve_status(
    current: ConversationStatus,
    executions: Mapping[str, ExecutionStatus],
    approvals: Mapping[str, frozenset[str]],
) -> ConversationStatus:
    """The reference *resolve* rule: a parked approval turns done/aborted into awaiting."""
    computed = compute_status(current, executions)
    if computed in ("done", "aborted") and any(approvals.values()):
        return "awaiting-approval"
    return computed


def _with(
    state: StatusState, status: ConversationStatus, **changes: object
) -> tuple[StatusState, list[StatusChanged]]:
    new = replace(state, status=status, **changes)  # type: ignore[arg-type]
    effects = [StatusChanged(state.status, status)] if status != state.status else []
    return new, effects


def reduce(state: StatusState, event: StatusEvent) -> tuple[StatusState, list[StatusChanged]]:
    """Apply ``event`` and return the new state with the effects to perform."""
    match event:
        case ChunkSeen(execution_id=eid):
            if state.executions.get(eid) != "streaming" or state.seen_chunk:
                return state, []
            status: ConversationStatus = "streaming" if state.status == "pending" else state.status
            return _with(state, status, seen_chunk=True)
        case ApprovalRequested(execution_id=eid, tool_call_id=tid):
            if state.executions.get(eid) != "streaming":
                return state, []
            approvals = dict(state.approvals)
            approvals[eid] = approvals.get(eid, frozenset()) | {tid}
            return replace(state, approvals=approvals), []
        case ApprovalResolved(execution_id=eid, tool_call_id=tid):
            # Only a streaming execution resolves its approvals; a finished one keeps them
            # parked (its continuation is a new stream).
            if state.executions.get(eid) != "streaming" or tid not in state.approvals.get(
                eid, frozenset()
            ):
                return state, []
            approvals = dict(state.approvals)
            approvals[eid] = approvals[eid] - {tid}
            return replace(state, approvals=approvals), []
        case ExecutionTerminal(execution_id=eid, outcome=outcome):
            if state.executions.get(eid) not in ("streaming", "aborted"):
                return state, []
            executions = dict(state.executions)
            approvals = dict(state.approvals)
            if outcome == "done":
                executions[eid] = "done"
                status = resolve_status(state.status, executions, approvals)
            elif outcome == "paused":
                executions[eid] = "aborted"
                approvals.pop(eid, None)
                status = resolve_status(state.status, executions, approvals)
            else:
                executions[eid] = "error"
                approvals.pop(eid, None)
                status = compute_status(state.status, executions)
            if state.status == "aborted" and status in LIVE_STATUSES:
                status = "aborted"  # an explicit stop is never undone by a sibling's chunk
            return _with(state, status, executions=executions, approvals=approvals)
        case Abort():
            if state.status not in LIVE_STATUSES:
                return state, []
            executions = {
                eid: ("aborted" if s == "streaming" else s) for eid, s in state.executions.items()
            }
            return _with(state, "aborted", executions=executions)
        case _:
            assert_never(event)
