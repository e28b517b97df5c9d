"""``reduce(state, event) -> (state, effects)``: the agent-session host's decisions (§6.6).

Pure and synchronous: it never awaits, never does I/O and never raises for a bad transition; an
event that does not fit the state is a no-op returning ``LogInvalid``. The state, events and
effects are defined in ``drupe.sessions.state``; the shell is ``drupe.sessions.host``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from drupe.chunks.types import Chunk
from drupe.sessions.state import (
    CloseConnection,
    CloseStream,
    CompactionEnded,
    CompactionStarted,
    ConnectionLost,
    ConnectionOpened,
    ConnectionStarted,
    DeliverBuffer,
    DropBuffer,
    DropQueued,
    Effect,
    Event,
    FollowUp,
    Forward,
    Idle,
    IdleExpired,
    LaunchAbandoned,
    LaunchFailed,
    LaunchStarted,
    LaunchTarget,
    LogInvalid,
    QueueFollowUp,
    RedirectAccepted,
    Result,
    RuntimeChunk,
    RuntimeTerminal,
    RuntimeTurnStarted,
    ScheduleLaunch,
    SessionOnIdle,
    SessionState,
    Status,
    SteerBoundaryReached,
    SteerUndeliveredInputs,
    Stopped,
    TerminateHeld,
    Transition,
    TurnAdmitted,
    TurnCreated,
    TurnExec,
    TurnStreamOpened,
    TurnTerminal,
    is_busy,
)

__all__ = ["reduce"]


def _invalid(state: SessionState, event: Event, reason: str) -> Result:
    return state, [LogInvalid(type(event).__name__, reason)]


def _ordered(back: tuple[FollowUp, ...], queue: tuple[FollowUp, ...]) -> tuple[FollowUp, ...]:
    """Follow-ups handed back regain their place in submission order (stable)."""
    return tuple(sorted((*back, *queue), key=lambda item: item.seq))


def _maybe_launch(state: SessionState) -> Result:
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


def reduce(state: SessionState, event: Event) -> Result:
    """Apply ``event``; return the new state and the effects the shell must perform."""
    handler = _HANDLERS.get(type(event))
    if handler is None:
        return _invalid(state, event, "unknown event")
    return handler(state, event)


# --- turns ---------------------------------------------------------------------------------


def _turn_created(state: SessionState, event: TurnCreated) -> Result:
    return _CREATED[event.via](state, event)


def _created_fresh(state: SessionState, event: TurnCreated) -> Result:
    if is_busy(state):
        return _invalid(state, event, "a fresh turn on a busy session")
    return replace(state, execution=TurnExec(turn=event.turn)), []


def _created_queued(state: SessionState, event: TurnCreated) -> Result:
    turn = event.turn
    if not (
        state.launch == "running"
        and state.launch_target == "queued-turn"
        and isinstance(state.execution, Idle)
        and state.queue
        and state.queue[0].user_message_id == turn.user_message_id
    ):
        return _invalid(state, event, "no running queued-turn launch for this row")
    return replace(
        state,
        execution=TurnExec(turn=turn),
        queue=state.queue[1:],
        launch="idle",
        launch_target=None,
    ), []


def _created_continuation(state: SessionState, event: TurnCreated) -> Result:
    execution = state.execution
    if not (
        state.launch == "running"
        and state.launch_target == "steer-continuation"
        and isinstance(execution, Transition)
        and execution.source_settled
        and event.turn.pre_admitted
    ):
        return _invalid(state, event, "no running steer-continuation launch")
    return replace(
        state,
        execution=TurnExec(
            turn=event.turn,
            admission="admitted",
            buffer=execution.buffer,
            terminal=execution.terminal,
            folded=execution.folded,
        ),
        launch="idle",
        launch_target=None,
    ), []


def _created_runtime(state: SessionState, event: TurnCreated) -> Result:
    execution = state.execution
    if not (
        state.launch == "running"
        and state.launch_target == "runtime-turn"
        and isinstance(execution, TurnExec)
        and execution.turn.turn_id == event.turn.turn_id
        and execution.phase == "unopened"
    ):
        return _invalid(state, event, "no running runtime-turn launch for this turn")
    return replace(state, launch="idle", launch_target=None), []


_CREATED: dict[str, Callable[[SessionState, TurnCreated], Result]] = {
    "fresh": _created_fresh,
    "queued-turn": _created_queued,
    "steer-continuation": _created_continuation,
    "runtime-turn": _created_runtime,
}


def _runtime_turn_started(state: SessionState, event: RuntimeTurnStarted) -> Result:
    """The runtime began a turn: at once on an idle session, else it waits (buffered)."""
    turn = event.turn
    if not (turn.runtime and turn.pre_admitted):
        return _invalid(state, event, "not a runtime-initiated, pre-admitted turn")
    if _runtime_running(state):
        return _invalid(state, event, "a runtime turn while the runtime's turn is running")
    started = TurnExec(turn=turn, admission="admitted")
    if is_busy(state):
        return _maybe_launch(replace(state, waiting=(*state.waiting, started)))
    return replace(state, execution=started, launch="scheduled", launch_target="runtime-turn"), [
        ScheduleLaunch("runtime-turn")
    ]


def _runtime_running(state: SessionState) -> bool:
    """Whether the runtime is still answering a turn it was given or began (no terminal yet)."""
    if state.waiting:
        return state.waiting[-1].terminal is None
    execution = state.execution
    if isinstance(execution, TurnExec):
        return execution.terminal is None and execution.admission == "admitted"
    return isinstance(execution, Transition) and execution.terminal is None


def _stream_opened(state: SessionState, event: TurnStreamOpened) -> Result:
    execution = state.execution
    turn_id = event.turn_id
    if not (
        isinstance(execution, TurnExec)
        and execution.turn.turn_id == turn_id
        and execution.phase == "unopened"
        and state.launch_target != "runtime-turn"  # its row is not saved yet
    ):
        return _invalid(state, event, "no unopened turn with this id")
    effects: list[Effect] = []
    if execution.buffer:
        effects.append(DeliverBuffer(turn_id, execution.buffer))
    opened = replace(execution, phase="open", buffer=())
    if execution.terminal is not None:
        status, error = execution.terminal
        effects.append(CloseStream(turn_id, status, error))
        opened = replace(opened, phase="awaiting-persistence")
    return replace(state, execution=opened), effects


def _admitted(state: SessionState, event: TurnAdmitted) -> Result:
    execution = state.execution
    if not (isinstance(execution, TurnExec) and execution.turn.turn_id == event.turn_id):
        return _invalid(state, event, "no turn with this id")
    return replace(state, execution=replace(execution, admission="admitted")), []


# --- runtime output ------------------------------------------------------------------------


def _runtime_chunk(state: SessionState, event: RuntimeChunk) -> Result:
    chunk = event.chunk
    if state.waiting:
        newest = state.waiting[-1]
        if newest.terminal is None:
            return _buffer_waiting(state, newest, chunk)
        return state, [DropBuffer((chunk,), "no live turn")]
    execution = state.execution
    if isinstance(execution, TurnExec):
        if execution.phase == "open":
            return state, [Forward(execution.turn.turn_id, chunk)]
        if execution.phase == "unopened" and execution.terminal is None:
            return _buffer(state, execution, chunk)
    if isinstance(execution, Transition) and execution.terminal is None:
        return _buffer(state, execution, chunk)
    return state, [DropBuffer((chunk,), "no live turn")]


def _runtime_terminal_event(state: SessionState, event: RuntimeTerminal) -> Result:
    if state.waiting:
        newest = state.waiting[-1]
        if newest.terminal is not None:
            return _invalid(state, event, "a runtime terminal without a live turn")
        ended = replace(newest, terminal=(event.status, event.error))
        return replace(state, waiting=(*state.waiting[:-1], ended)), []
    return _runtime_terminal(state, event, event.status, event.error)


def _turn_terminal_event(state: SessionState, event: TurnTerminal) -> Result:
    return _turn_terminal(state, event, event.turn_id, event.status)


# --- follow-ups and steering ---------------------------------------------------------------


def _queue_follow_up(state: SessionState, event: QueueFollowUp) -> Result:
    return _maybe_launch(replace(state, queue=(*state.queue, event.item)))


def _redirect_accepted(state: SessionState, event: RedirectAccepted) -> Result:
    execution = state.execution
    item = event.item
    if isinstance(execution, TurnExec) and execution.turn.turn_id == event.turn_id:
        if execution.terminal is not None:
            # The runtime already ended the turn: it will never answer it there.
            return _maybe_launch(replace(state, queue=(*state.queue, item)))
        folded = (*execution.folded, item)
        return replace(state, execution=replace(execution, folded=folded)), []
    if isinstance(execution, Transition) and execution.source.turn_id == event.turn_id:
        folded = (*execution.folded, item)
        return replace(state, execution=replace(execution, folded=folded)), []
    # The turn is gone: queue it so the follow-up is never lost.
    return _maybe_launch(replace(state, queue=(*state.queue, item)))


def _steer_boundary(state: SessionState, event: SteerBoundaryReached) -> Result:
    execution = state.execution
    ids = event.user_message_ids
    if not (
        isinstance(execution, TurnExec) and execution.phase == "open" and execution.terminal is None
    ):
        return _invalid(state, event, "steer-boundary outside an open turn")
    inputs = tuple(f for f in execution.folded if f.user_message_id in ids)
    if not inputs:
        return _invalid(state, event, "steer-boundary for steers this turn never took")
    rest = tuple(f for f in execution.folded if f.user_message_id not in ids)
    transition = Transition(
        source=execution.turn,
        inputs=inputs,
        headless=execution.turn.headless and all(f.headless for f in inputs),
        folded=rest,
    )
    return replace(state, execution=transition), [CloseStream(execution.turn.turn_id, "success")]


def _steer_undelivered(state: SessionState, event: SteerUndeliveredInputs) -> Result:
    execution = state.execution
    ids = event.user_message_ids
    if not isinstance(execution, TurnExec | Transition):
        return _invalid(state, event, "steer-undelivered without a turn")
    back = tuple(f for f in execution.folded if f.user_message_id in ids)
    rest = tuple(f for f in execution.folded if f.user_message_id not in ids)
    requeued = replace(
        state,
        execution=replace(execution, folded=rest),
        queue=_ordered(back, state.queue),
    )
    return _maybe_launch(requeued)


# --- launches ------------------------------------------------------------------------------


def _launch_started(state: SessionState, event: LaunchStarted) -> Result:
    if state.launch != "scheduled" or state.launch_target != event.target:
        return _invalid(state, event, "no launch scheduled for this target")
    return replace(state, launch="running"), []


def _launch_abandoned(state: SessionState, event: LaunchAbandoned) -> Result:
    if state.launch != "running" or state.launch_target != event.target:
        return _invalid(state, event, "no running launch for this target")
    return _maybe_launch(replace(state, launch="idle", launch_target=None))


def _launch_failed_event(state: SessionState, event: LaunchFailed) -> Result:
    return _launch_failed(state, event, event.target, event.clear_queue, event.error)


# --- compaction, stop, idle, connection ----------------------------------------------------


def _compaction_started(state: SessionState, event: CompactionStarted) -> Result:
    return replace(state, compacting=True), []


def _compaction_ended(state: SessionState, event: CompactionEnded) -> Result:
    effects: list[Effect] = []
    settled = replace(state, compacting=False)
    if event.anchor is not None:
        settled, routed = reduce(settled, RuntimeChunk(event.anchor))
        effects.extend(routed)
    settled, launched = _maybe_launch(settled)
    return settled, [*effects, *launched]


def _idle_expired(state: SessionState, event: IdleExpired) -> Result:
    if is_busy(state) or state.connection == "disconnected":
        return _invalid(state, event, "idle expiry on a busy or closed session")
    return replace(state, connection="disconnected"), [CloseConnection("idle"), SessionOnIdle()]


def _connection_started(state: SessionState, event: ConnectionStarted) -> Result:
    if state.connection != "disconnected":
        return _invalid(state, event, "a connect while connecting or connected")
    return replace(state, connection="connecting", attempt=event.attempt), []


def _connection_opened(state: SessionState, event: ConnectionOpened) -> Result:
    if state.connection != "connecting" or state.attempt != event.attempt:
        return _invalid(state, event, "a stale connect finished")
    return replace(state, connection="connected"), []


def _connection_lost(state: SessionState, event: ConnectionLost) -> Result:
    if state.attempt != event.attempt:
        return state, []  # a stale attempt's loss
    return replace(state, connection="disconnected"), []


def _stopped(state: SessionState, event: Stopped) -> Result:
    """The user stopped the session: the connection closes, the live turn ends ``paused``."""
    keep_queue = event.keep_queue
    execution = state.execution
    effects: list[Effect] = [CloseConnection("stop")]
    stopped = replace(state, connection="disconnected", waiting=())
    for waiting in state.waiting:
        # Runtime turns not begun yet: nothing of them was streamed; they end with the runtime.
        if waiting.buffer:
            effects.append(DropBuffer(waiting.buffer, "stopped"))
    if state.queue and not keep_queue:
        effects.append(DropQueued(state.queue, "stopped"))
        stopped = replace(stopped, queue=())
    if not keep_queue and stopped.launch == "scheduled" and stopped.launch_target == "queued-turn":
        stopped = replace(stopped, launch="idle", launch_target=None)
    if stopped.launch_target == "runtime-turn" and isinstance(execution, TurnExec):
        return _stop_unsaved_runtime_turn(stopped, execution, effects)
    if isinstance(execution, TurnExec):
        stopped = replace(stopped, execution=_stop_turn(execution, keep_queue, effects))
        if keep_queue and execution.folded:
            # The runtime was torn down under them: they go back, first in line.
            stopped = replace(stopped, queue=_ordered(execution.folded, stopped.queue))
    if isinstance(execution, Transition) and execution.terminal is None:
        # A user stop during the roll: A2 still gets its row, with what was buffered, and ends
        # ``paused`` (the continuation opens, delivers the buffer, closes).
        if execution.folded and keep_queue:
            stopped = replace(stopped, queue=_ordered(execution.folded, stopped.queue))
        elif execution.folded:
            effects.append(DropQueued(execution.folded, "stopped"))
        ended_roll = replace(execution, folded=(), terminal=("paused", None))
        return replace(stopped, execution=ended_roll), effects
    stopped, launched = _maybe_launch(stopped)
    return stopped, [*effects, *launched]


def _stop_unsaved_runtime_turn(
    stopped: SessionState, execution: TurnExec, effects: list[Effect]
) -> Result:
    """A runtime turn whose row is not saved yet: nothing was streamed; it ends here (a
    running launch finds it gone and abandons)."""
    if execution.buffer:
        effects.append(DropBuffer(execution.buffer, "stopped"))
    stopped = replace(stopped, execution=Idle())
    if stopped.launch == "scheduled":
        stopped = replace(stopped, launch="idle", launch_target=None)
    stopped, launched = _maybe_launch(stopped)
    return stopped, [*effects, *launched]


def _stop_turn(execution: TurnExec, keep_queue: bool, effects: list[Effect]) -> TurnExec:
    """The stopped turn: the manager is ending its stream (paused); nothing more reaches it."""
    if execution.folded and not keep_queue:
        effects.append(DropQueued(execution.folded, "stopped"))
    ended = replace(execution, folded=(), phase="awaiting-persistence")
    if execution.terminal is None:
        ended = replace(ended, terminal=("paused", None))
    return ended


_HANDLERS: dict[type, Callable[[SessionState, Any], Result]] = {
    TurnCreated: _turn_created,
    RuntimeTurnStarted: _runtime_turn_started,
    TurnStreamOpened: _stream_opened,
    TurnAdmitted: _admitted,
    RuntimeChunk: _runtime_chunk,
    RuntimeTerminal: _runtime_terminal_event,
    TurnTerminal: _turn_terminal_event,
    QueueFollowUp: _queue_follow_up,
    RedirectAccepted: _redirect_accepted,
    SteerBoundaryReached: _steer_boundary,
    SteerUndeliveredInputs: _steer_undelivered,
    LaunchStarted: _launch_started,
    LaunchAbandoned: _launch_abandoned,
    LaunchFailed: _launch_failed_event,
    CompactionStarted: _compaction_started,
    CompactionEnded: _compaction_ended,
    Stopped: _stopped,
    IdleExpired: _idle_expired,
    ConnectionStarted: _connection_started,
    ConnectionOpened: _connection_opened,
    ConnectionLost: _connection_lost,
}
"""One handler per event type (``reduce`` dispatches on the event's exact type)."""


def _buffer_waiting(state: SessionState, waiting: TurnExec, chunk: Chunk) -> Result:
    """Buffer ``chunk`` in the newest waiting runtime turn, within ``buffer_limit``."""
    if len(waiting.buffer) < state.buffer_limit:
        buffered = replace(waiting, buffer=(*waiting.buffer, chunk))
        return replace(state, waiting=(*state.waiting[:-1], buffered)), []
    overflowed = replace(waiting, terminal=("error", _overflow_error(state)))
    ended = replace(state, connection="disconnected", waiting=(*state.waiting[:-1], overflowed))
    return ended, [DropBuffer((chunk,), "buffer overflow"), CloseConnection("buffer overflow")]


def _overflow_error(state: SessionState) -> dict[str, Any]:
    return {
        "name": "BufferOverflow",
        "message": f"more than {state.buffer_limit} chunks arrived before the answer's stream "
        "opened; the turn was ended",
    }


def _buffer(state: SessionState, execution: TurnExec | Transition, chunk: Chunk) -> Result:
    """Buffer ``chunk`` for a stream that is not open yet, within ``buffer_limit``."""
    if len(execution.buffer) < state.buffer_limit:
        buffered = replace(execution, buffer=(*execution.buffer, chunk))
        return replace(state, execution=buffered), []
    overflowed = replace(execution, terminal=("error", _overflow_error(state)))
    ended = _ended(replace(state, connection="disconnected"), overflowed)
    return ended, [DropBuffer((chunk,), "buffer overflow"), CloseConnection("buffer overflow")]


def _runtime_terminal(
    state: SessionState, event: Event, status: Status, error: Mapping[str, Any] | None
) -> Result:
    execution = state.execution
    if isinstance(execution, Transition):
        if execution.terminal is not None:
            return _invalid(state, event, "a second runtime terminal during the roll")
        # It ends the continuation A2: latched, delivered after the buffer when A2 opens.
        return _ended(state, replace(execution, terminal=(status, error))), []
    if not isinstance(execution, TurnExec) or execution.terminal is not None:
        return _invalid(state, event, "a runtime terminal without a live turn")
    turn_id = execution.turn.turn_id
    if execution.phase == "unopened":
        # Latched: the stream closes with it when it opens, after the buffer.
        return _ended(state, replace(execution, terminal=(status, error))), []
    if execution.phase != "open":
        return _invalid(state, event, "the turn's stream already closed")
    closed = replace(execution, phase="awaiting-persistence", terminal=(status, error))
    return _ended(state, closed), [CloseStream(turn_id, status, error)]


def _ended(state: SessionState, execution: TurnExec | Transition) -> SessionState:
    """``state`` with ``execution``, whose runtime turn ended: the steers it never answered go
    back to the queue."""
    if not execution.folded:
        return replace(state, execution=execution)
    return replace(
        state,
        execution=replace(execution, folded=()),
        queue=_ordered(execution.folded, state.queue),
    )


def _turn_terminal(state: SessionState, event: Event, turn_id: str, status: Status) -> Result:
    execution = state.execution
    if isinstance(execution, Transition) and execution.source.turn_id == turn_id:
        if execution.source_settled:
            return _invalid(state, event, "the roll's source settled twice")
        if status != "success":
            return _abandon(replace(state, last_terminal=status), execution)
        settled = replace(
            state,
            execution=replace(execution, source_settled=True),
            last_terminal=status,
            launch="scheduled",
            launch_target="steer-continuation",
        )
        return settled, [ScheduleLaunch("steer-continuation")]
    if not (isinstance(execution, TurnExec) and execution.turn.turn_id == turn_id):
        return _invalid(state, event, "no turn with this id")
    # A turn may also end without a runtime terminal: stop, idle watchdog, a raised source.
    effects: list[Effect] = []
    queue = _ordered(execution.folded, state.queue)
    idle = replace(state, execution=Idle(), last_terminal=status, queue=queue)
    if execution.buffer:
        effects.append(DropBuffer(execution.buffer, "turn ended before its stream opened"))
    idle, launched = _maybe_launch(idle)
    return idle, [*effects, *launched]


def _abandon(state: SessionState, execution: Transition) -> Result:
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
    abandoned, launched = _maybe_launch(replace(state, execution=Idle()))
    return abandoned, [*out, *launched]


def _launch_failed(
    state: SessionState,
    event: Event,
    target: LaunchTarget,
    clear_queue: bool,
    error: Mapping[str, Any],
) -> Result:
    if state.launch != "running" or state.launch_target != target:
        return _invalid(state, event, "no running launch for this target")
    base = replace(state, launch="idle", launch_target=None, last_terminal="error")
    effects: list[Effect] = [TerminateHeld(error)]
    if target == "runtime-turn":
        execution = state.execution
        if isinstance(execution, TurnExec) and execution.buffer:
            effects.append(DropBuffer(execution.buffer, "runtime turn failed to launch"))
        rest, launched = _maybe_launch(replace(base, execution=Idle()))
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
            dropped, launched = _maybe_launch(dropped)
            return dropped, [*out, *launched]
        return base, effects
    if clear_queue:
        if state.queue:
            effects.append(DropQueued(state.queue, "launch failed"))
        rest, launched = _maybe_launch(replace(base, queue=()))
        return rest, [*effects, *launched]
    if state.queue:
        effects.append(DropQueued(state.queue[:1], "launch failed"))
    rest, launched = _maybe_launch(replace(base, queue=state.queue[1:]))
    return rest, [*effects, *launched]
