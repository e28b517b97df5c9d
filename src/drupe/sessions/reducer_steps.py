"""The shared steps of the session reducer: what several of ``reduce``'s handlers do.

Pure and synchronous, like ``reduce`` (no await, no I/O, never raises for a bad transition):

* ``invalid``: the no-op answer to an event that does not fit the state (``LogInvalid``);
* ``ordered``: follow-ups handed back regain their place in submission order;
* ``maybe_launch``: when nothing else runs, schedule the next turn (a waiting runtime turn first,
  else the head of the queue);
* ``buffer_chunk`` / ``buffer_waiting``: buffer a chunk for a stream not open yet, within
  ``buffer_limit`` (past it the turn ends ``error`` and the connection closes);
* ``runtime_terminal``, ``turn_terminal``, ``end_runtime_turn``: the runtime's and the manager's
  ends of a turn (a roll's source settling schedules the steer continuation);
* ``abandon_roll``: a roll whose source failed before it settled;
* ``launch_failed``: a launch that failed, by target (held streams terminated, queue dropped or
  advanced).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from drupe.chunks.types import Chunk
from drupe.sessions.session_events import Event
from drupe.sessions.state import (
    CloseConnection,
    CloseStream,
    DropBuffer,
    DropQueued,
    Effect,
    FollowUp,
    Idle,
    LaunchTarget,
    LogInvalid,
    Result,
    ScheduleLaunch,
    SessionState,
    Status,
    TerminateHeld,
    Transition,
    TurnExec,
)

__all__ = [
    "abandon_roll",
    "buffer_chunk",
    "buffer_waiting",
    "end_runtime_turn",
    "invalid",
    "launch_failed",
    "maybe_launch",
    "ordered",
    "overflow_error",
    "runtime_terminal",
    "turn_terminal",
]


def invalid(state: SessionState, event: Event, reason: str) -> Result:
    return state, [LogInvalid(type(event).__name__, reason)]


def ordered(back: tuple[FollowUp, ...], queue: tuple[FollowUp, ...]) -> tuple[FollowUp, ...]:
    """Follow-ups handed back regain their place in submission order (stable)."""
    return tuple(sorted((*back, *queue), key=lambda item: item.seq))


def maybe_launch(state: SessionState) -> Result:
    """When nothing else runs, schedule the next turn: a waiting runtime turn first (the
    runtime is already answering it), else the head of the queue."""
    if state.launch != "idle" or not isinstance(state.execution, Idle) or state.compacting:
        return state, []
    if state.waiting:
        return replace(
            state,
            execution=state.waiting[0],
            waiting=state.waiting[1:],
            launch="scheduled",
            launch_target="runtime-turn",
        ), [ScheduleLaunch("runtime-turn")]
    if state.queue:
        return replace(state, launch="scheduled", launch_target="queued-turn"), [
            ScheduleLaunch("queued-turn")
        ]
    return state, []


def buffer_waiting(state: SessionState, waiting: TurnExec, chunk: Chunk) -> Result:
    """Buffer ``chunk`` in the newest waiting runtime turn, within ``buffer_limit``."""
    if len(waiting.buffer) < state.buffer_limit:
        buffered = replace(waiting, buffer=(*waiting.buffer, chunk))
        return replace(state, waiting=(*state.waiting[:-1], buffered)), []
    overflowed = replace(waiting, terminal=("error", overflow_error(state)))
    ended = replace(state, connection="disconnected", waiting=(*state.waiting[:-1], overflowed))
    return ended, [DropBuffer((chunk,), "buffer overflow"), CloseConnection("buffer overflow")]


def overflow_error(state: SessionState) -> dict[str, Any]:
    return {
        "name": "BufferOverflow",
        "message": f"more than {state.buffer_limit} chunks arrived before the answer's stream "
        "opened; the turn was ended",
    }


def buffer_chunk(state: SessionState, execution: TurnExec | Transition, chunk: Chunk) -> Result:
    """Buffer ``chunk`` for a stream that is not open yet, within ``buffer_limit``."""
    if len(execution.buffer) < state.buffer_limit:
        buffered = replace(execution, buffer=(*execution.buffer, chunk))
        return replace(state, execution=buffered), []
    overflowed = replace(execution, terminal=("error", overflow_error(state)))
    ended = end_runtime_turn(replace(state, connection="disconnected"), overflowed)
    return ended, [DropBuffer((chunk,), "buffer overflow"), CloseConnection("buffer overflow")]


def runtime_terminal(
    state: SessionState, event: Event, status: Status, error: Mapping[str, Any] | None
) -> Result:
    execution = state.execution
    if isinstance(execution, Transition):
        if execution.terminal is not None:
            return invalid(state, event, "a second runtime terminal during the roll")
        # It ends the continuation A2: latched, delivered after the buffer when A2 opens.
        return end_runtime_turn(state, replace(execution, terminal=(status, error))), []
    if not isinstance(execution, TurnExec) or execution.terminal is not None:
        return invalid(state, event, "a runtime terminal without a live turn")
    turn_id = execution.turn.turn_id
    if execution.phase == "unopened":
        # Latched: the stream closes with it when it opens, after the buffer.
        return end_runtime_turn(state, replace(execution, terminal=(status, error))), []
    if execution.phase != "open":
        return invalid(state, event, "the turn's stream already closed")
    closed = replace(execution, phase="awaiting-persistence", terminal=(status, error))
    return end_runtime_turn(state, closed), [CloseStream(turn_id, status, error)]


def end_runtime_turn(state: SessionState, execution: TurnExec | Transition) -> SessionState:
    """``state`` with ``execution``, whose runtime turn ended: the steers it never answered go
    back to the queue."""
    if not execution.folded:
        return replace(state, execution=execution)
    return replace(
        state,
        execution=replace(execution, folded=()),
        queue=ordered(execution.folded, state.queue),
    )


def turn_terminal(state: SessionState, event: Event, turn_id: str, status: Status) -> Result:
    execution = state.execution
    if isinstance(execution, Transition) and execution.source.turn_id == turn_id:
        if execution.source_settled:
            return invalid(state, event, "the roll's source settled twice")
        if status != "success":
            return abandon_roll(replace(state, last_terminal=status), execution)
        settled = replace(
            state,
            execution=replace(execution, source_settled=True),
            last_terminal=status,
            launch="scheduled",
            launch_target="steer-continuation",
        )
        return settled, [ScheduleLaunch("steer-continuation")]
    if not (isinstance(execution, TurnExec) and execution.turn.turn_id == turn_id):
        return invalid(state, event, "no turn with this id")
    # A turn may also end without a runtime terminal: stop, idle watchdog, a raised source.
    effects: list[Effect] = []
    queue = ordered(execution.folded, state.queue)
    idle = replace(state, execution=Idle(), last_terminal=status, queue=queue)
    if execution.buffer:
        effects.append(DropBuffer(execution.buffer, "turn ended before its stream opened"))
    idle, launched = maybe_launch(idle)
    return idle, [*effects, *launched]


def abandon_roll(state: SessionState, execution: Transition) -> Result:
    """The roll's source A1a ended without success before it settled: the roll is over.

    A2 was never launched (its launch is scheduled only when A1a settles), so nothing is held
    for it and no launch is pending for it.
    """
    reason = "roll abandoned"
    out: list[Effect] = []
    if execution.buffer:
        out.append(DropBuffer(execution.buffer, reason))
    # The steers stay visibly unanswered (their rows remain, with no answer under them).
    dropped = (*execution.inputs, *execution.folded)
    if dropped:
        out.append(DropQueued(dropped, reason))
    abandoned, launched = maybe_launch(replace(state, execution=Idle()))
    return abandoned, [*out, *launched]


def launch_failed(
    state: SessionState,
    event: Event,
    target: LaunchTarget,
    clear_queue: bool,
    error: Mapping[str, Any],
) -> Result:
    if state.launch != "running" or state.launch_target != target:
        return invalid(state, event, "no running launch for this target")
    base = replace(state, launch="idle", launch_target=None, last_terminal="error")
    effects: list[Effect] = [TerminateHeld(error)]
    if target == "runtime-turn":
        execution = state.execution
        if isinstance(execution, TurnExec) and execution.buffer:
            effects.append(DropBuffer(execution.buffer, "runtime turn failed to launch"))
        rest, launched = maybe_launch(replace(base, execution=Idle()))
        return rest, [*effects, *launched]
    if target == "steer-continuation":
        execution = state.execution
        if isinstance(execution, Transition):
            dropped = replace(base, execution=Idle(), queue=())
            out: list[Effect] = [*effects]
            if execution.buffer:
                out.append(DropBuffer(execution.buffer, "continuation failed to launch"))
            lost = (*execution.inputs, *execution.folded, *state.queue)
            if lost:
                out.append(DropQueued(lost, "continuation failed to launch"))
            dropped, launched = maybe_launch(dropped)
            return dropped, [*out, *launched]
        return base, effects
    if clear_queue:
        if state.queue:
            effects.append(DropQueued(state.queue, "launch failed"))
        rest, launched = maybe_launch(replace(base, queue=()))
        return rest, [*effects, *launched]
    if state.queue:
        effects.append(DropQueued(state.queue[:1], "launch failed"))
    rest, launched = maybe_launch(replace(base, queue=state.queue[1:]))
    return rest, [*effects, *launched]
