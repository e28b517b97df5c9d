"""``reduce(state, event) -> (state, effects)``: the agent-session host's decisions (§6.6).

Pure and synchronous: it never awaits, never does I/O and never raises for a bad transition; an
event that does not fit the state is a no-op returning ``LogInvalid``. The state, events and
effects are defined in ``drupe.sessions.state``; the steps several handlers share are in
``drupe.sessions.reducer_steps`` and a stop in ``drupe.sessions.reducer_stop``; the shell is
``drupe.sessions.host``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from drupe.sessions.reducer_steps import (
    buffer_chunk,
    buffer_waiting,
    invalid,
    launch_failed,
    maybe_launch,
    ordered,
    runtime_terminal,
    turn_terminal,
)
from drupe.sessions.reducer_stop import stop
from drupe.sessions.session_events import (
    CompactionEnded,
    CompactionStarted,
    ConnectionLost,
    ConnectionOpened,
    ConnectionStarted,
    Event,
    IdleExpired,
    LaunchAbandoned,
    LaunchFailed,
    LaunchStarted,
    QueueFollowUp,
    RedirectAccepted,
    RuntimeChunk,
    RuntimeTerminal,
    RuntimeTurnStarted,
    SteerBoundaryReached,
    SteerUndeliveredInputs,
    Stopped,
    TurnAdmitted,
    TurnCreated,
    TurnStreamOpened,
    TurnTerminal,
)
from drupe.sessions.state import (
    CloseConnection,
    CloseStream,
    DeliverBuffer,
    DropBuffer,
    Effect,
    Forward,
    Idle,
    Result,
    ScheduleLaunch,
    SessionOnIdle,
    SessionState,
    Transition,
    TurnExec,
    is_busy,
)

__all__ = ["reduce"]


def reduce(state: SessionState, event: Event) -> Result:
    """Apply ``event``; return the new state and the effects the shell must perform."""
    handler = _HANDLERS.get(type(event))
    if handler is None:
        return invalid(state, event, "unknown event")
    return handler(state, event)


# --- turns ---------------------------------------------------------------------------------


def _turn_created(state: SessionState, event: TurnCreated) -> Result:
    return _CREATED[event.via](state, event)


def _created_fresh(state: SessionState, event: TurnCreated) -> Result:
    if is_busy(state):
        return invalid(state, event, "a fresh turn on a busy session")
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
        return invalid(state, event, "no running queued-turn launch for this row")
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
        return invalid(state, event, "no running steer-continuation launch")
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
        return invalid(state, event, "no running runtime-turn launch for this turn")
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
        return invalid(state, event, "not a runtime-initiated, pre-admitted turn")
    if _runtime_running(state):
        return invalid(state, event, "a runtime turn while the runtime's turn is running")
    started = TurnExec(turn=turn, admission="admitted")
    if is_busy(state):
        return maybe_launch(replace(state, waiting=(*state.waiting, started)))
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
        return invalid(state, event, "no unopened turn with this id")
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
        return invalid(state, event, "no turn with this id")
    return replace(state, execution=replace(execution, admission="admitted")), []


# --- runtime output ------------------------------------------------------------------------


def _runtime_chunk(state: SessionState, event: RuntimeChunk) -> Result:
    chunk = event.chunk
    if state.waiting:
        newest = state.waiting[-1]
        if newest.terminal is None:
            return buffer_waiting(state, newest, chunk)
        return state, [DropBuffer((chunk,), "no live turn")]
    execution = state.execution
    if isinstance(execution, TurnExec):
        if execution.phase == "open":
            return state, [Forward(execution.turn.turn_id, chunk)]
        if execution.phase == "unopened" and execution.terminal is None:
            return buffer_chunk(state, execution, chunk)
    if isinstance(execution, Transition) and execution.terminal is None:
        return buffer_chunk(state, execution, chunk)
    return state, [DropBuffer((chunk,), "no live turn")]


def _runtime_terminal_event(state: SessionState, event: RuntimeTerminal) -> Result:
    if state.waiting:
        newest = state.waiting[-1]
        if newest.terminal is not None:
            return invalid(state, event, "a runtime terminal without a live turn")
        ended = replace(newest, terminal=(event.status, event.error))
        return replace(state, waiting=(*state.waiting[:-1], ended)), []
    return runtime_terminal(state, event, event.status, event.error)


def _turn_terminal_event(state: SessionState, event: TurnTerminal) -> Result:
    return turn_terminal(state, event, event.turn_id, event.status)


# --- follow-ups and steering ---------------------------------------------------------------


def _queue_follow_up(state: SessionState, event: QueueFollowUp) -> Result:
    return maybe_launch(replace(state, queue=(*state.queue, event.item)))


def _redirect_accepted(state: SessionState, event: RedirectAccepted) -> Result:
    execution = state.execution
    item = event.item
    if isinstance(execution, TurnExec) and execution.turn.turn_id == event.turn_id:
        if execution.terminal is not None:
            # The runtime already ended the turn: it will never answer it there.
            return maybe_launch(replace(state, queue=(*state.queue, item)))
        folded = (*execution.folded, item)
        return replace(state, execution=replace(execution, folded=folded)), []
    if isinstance(execution, Transition) and execution.source.turn_id == event.turn_id:
        folded = (*execution.folded, item)
        return replace(state, execution=replace(execution, folded=folded)), []
    # The turn is gone: queue it so the follow-up is never lost.
    return maybe_launch(replace(state, queue=(*state.queue, item)))


def _steer_boundary(state: SessionState, event: SteerBoundaryReached) -> Result:
    execution = state.execution
    ids = event.user_message_ids
    if not (
        isinstance(execution, TurnExec) and execution.phase == "open" and execution.terminal is None
    ):
        return invalid(state, event, "steer-boundary outside an open turn")
    inputs = tuple(f for f in execution.folded if f.user_message_id in ids)
    if not inputs:
        return invalid(state, event, "steer-boundary for steers this turn never took")
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
        return invalid(state, event, "steer-undelivered without a turn")
    back = tuple(f for f in execution.folded if f.user_message_id in ids)
    rest = tuple(f for f in execution.folded if f.user_message_id not in ids)
    requeued = replace(
        state,
        execution=replace(execution, folded=rest),
        queue=ordered(back, state.queue),
    )
    return maybe_launch(requeued)


# --- launches ------------------------------------------------------------------------------


def _launch_started(state: SessionState, event: LaunchStarted) -> Result:
    if state.launch != "scheduled" or state.launch_target != event.target:
        return invalid(state, event, "no launch scheduled for this target")
    return replace(state, launch="running"), []


def _launch_abandoned(state: SessionState, event: LaunchAbandoned) -> Result:
    if state.launch != "running" or state.launch_target != event.target:
        return invalid(state, event, "no running launch for this target")
    return maybe_launch(replace(state, launch="idle", launch_target=None))


def _launch_failed_event(state: SessionState, event: LaunchFailed) -> Result:
    return launch_failed(state, event, event.target, event.clear_queue, event.error)


# --- compaction, stop, idle, connection ----------------------------------------------------


def _compaction_started(state: SessionState, event: CompactionStarted) -> Result:
    return replace(state, compacting=True), []


def _compaction_ended(state: SessionState, event: CompactionEnded) -> Result:
    effects: list[Effect] = []
    settled = replace(state, compacting=False)
    if event.anchor is not None:
        settled, routed = reduce(settled, RuntimeChunk(event.anchor))
        effects.extend(routed)
    settled, launched = maybe_launch(settled)
    return settled, [*effects, *launched]


def _idle_expired(state: SessionState, event: IdleExpired) -> Result:
    if is_busy(state) or state.connection == "disconnected":
        return invalid(state, event, "idle expiry on a busy or closed session")
    return replace(state, connection="disconnected"), [CloseConnection("idle"), SessionOnIdle()]


def _connection_started(state: SessionState, event: ConnectionStarted) -> Result:
    if state.connection != "disconnected":
        return invalid(state, event, "a connect while connecting or connected")
    return replace(state, connection="connecting", attempt=event.attempt), []


def _connection_opened(state: SessionState, event: ConnectionOpened) -> Result:
    if state.connection != "connecting" or state.attempt != event.attempt:
        return invalid(state, event, "a stale connect finished")
    return replace(state, connection="connected"), []


def _connection_lost(state: SessionState, event: ConnectionLost) -> Result:
    if state.attempt != event.attempt:
        return state, []  # a stale attempt's loss
    return replace(state, connection="disconnected"), []


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
    Stopped: stop,
    IdleExpired: _idle_expired,
    ConnectionStarted: _connection_started,
    ConnectionOpened: _connection_opened,
    ConnectionLost: _connection_lost,
}
"""One handler per event type (``reduce`` dispatches on the event's exact type)."""
