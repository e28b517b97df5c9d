"""A hypothesis state machine drives the pure agent-session reducer.

The machine plays the shell: it feeds random begins, follow-ups (redirect accepted or refused),
steer boundaries, steer-undelivered, chunks, runtime terminals, persistence confirmations, stops,
launches (that succeed or fail), compaction and idle expiry, and performs the effects the way
the host does. Invariants, checked after every step:

* at most one turn is live (created and not yet confirmed by persistence);
* every chunk is delivered exactly once and in order, or visibly dropped, or still buffered;
* no follow-up is lost: each is queued, folded into a turn, answered, or visibly dropped;
* queued follow-ups keep the order they were submitted in;
* a turn is never left without a terminal (teardown drives the session to rest and checks);
* terminal statuses: a turn's stream closes with the status the runtime reported for it
  (``success`` at a steer boundary, ``paused`` when stopped), and the persisted terminal is the
  session's ``last_terminal``;
* a failed queued launch drops only the head of the queue (``clear_queue``: all of it), a failed
  continuation launch drops the roll's steers and the queue;
* a stop drops the queue and the turn's folded steers, or with ``keep_queue`` keeps the queue and
  hands the folded steers back to it in submission order;
* a steer-continuation launch is pending only for a roll whose source settled.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from drupe.sessions.reducer import reduce
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
    DropQueued,
    Effect,
    FollowUp,
    Forward,
    Idle,
    LaunchTarget,
    LogInvalid,
    ScheduleLaunch,
    SessionState,
    TerminateHeld,
    Transition,
    TurnConfig,
    TurnExec,
    TurnInfo,
    can_redirect,
    is_busy,
    turn_config,
    will_continue,
)

BUFFER_LIMIT = 4
"""Small, so the machine reaches the overflow policy."""
CONFIG = turn_config("m1")
RARELY = st.sampled_from([False, False, False, True])
OTHER = turn_config("m2")


class SessionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.state = SessionState(buffer_limit=BUFFER_LIMIT)
        self.overflowed = False
        self.ids = itertools.count(1)
        self.seq = itertools.count(1)
        self.emitted: list[int] = []
        self.delivered: list[int] = []
        self.delivered_by_turn: dict[str, list[int]] = {}
        self.dropped_chunks: list[int] = []
        self.follow_ups: set[str] = set()
        self.answered: set[str] = set()
        self.dropped_follow_ups: set[str] = set()
        self.created: list[str] = []
        self.confirmed: set[str] = set()
        self.closed: dict[str, str] = {}
        """turn id -> status of its stream's end (CloseStream, or the manager's stop)."""
        self.held_terminated = 0
        self.stopped_roll: list[int] | None = None
        """The buffer of a roll stopped before its continuation opened."""
        self.stopped_turns: dict[str, list[int]] = {}
        """Continuation turn id -> the buffer it must deliver before it closes ``paused``."""
        self.reported: dict[str, str] = {}
        """turn id -> the runtime terminal status the machine sent while that turn was live."""
        self.roll_reported: dict[str, str] = {}
        """roll source turn id -> the runtime terminal sent during the roll (ends its A2)."""

    # --- shell -----------------------------------------------------------------------------

    def apply(self, event: Event) -> list[Effect]:
        self.state, effects = reduce(self.state, event)
        for effect in effects:
            match effect:
                case Forward(turn_id=turn_id, chunk=chunk):
                    self._deliver(turn_id, [chunk])
                case DeliverBuffer(turn_id=turn_id, chunks=chunks):
                    self._deliver(turn_id, list(chunks))
                case CloseStream(turn_id=turn_id, status=status):
                    assert turn_id not in self.closed, "a turn's stream closed twice"
                    if isinstance(event, SteerBoundaryReached):
                        assert status == "success", "the roll's source A1a ends as a success"
                    elif turn_id not in self.stopped_turns:
                        assert status == self.reported.get(turn_id), (turn_id, status)
                    self.closed[turn_id] = status
                    if turn_id in self.stopped_turns:
                        # A stopped roll ends as a user stop, with its buffered partial.
                        assert status == "paused", status
                        kept = self.delivered_by_turn.get(turn_id, [])
                        assert kept == self.stopped_turns[turn_id], kept
                case DropBuffer(chunks=chunks, reason=reason):
                    self.dropped_chunks.extend(c["seq"] for c in chunks)
                    if reason == "buffer overflow":
                        # The turn ends visibly: an error terminal is latched, the runtime
                        # connection is closed.
                        execution = (
                            self.state.waiting[-1] if self.state.waiting else self.state.execution
                        )
                        assert isinstance(execution, TurnExec | Transition)
                        assert execution.terminal is not None
                        assert execution.terminal[0] == "error"
                        assert self.state.connection == "disconnected"
                        assert any(isinstance(e, CloseConnection) for e in effects)
                        self.overflowed = True
                        if isinstance(execution, TurnExec):
                            self.reported[execution.turn.turn_id] = "error"
                        else:
                            self.roll_reported[execution.source.turn_id] = "error"
                case DropQueued(items=items):
                    for item in items:
                        assert item.user_message_id not in self.dropped_follow_ups
                        self.dropped_follow_ups.add(item.user_message_id)
                case _:
                    pass
        if not isinstance(self.state.execution, Transition):
            self.stopped_roll = None
        return effects

    def _deliver(self, turn_id: str, chunks: list[dict[str, Any]]) -> None:
        assert turn_id not in self.closed, "a chunk reached a closed stream"
        for chunk in chunks:
            self.delivered.append(chunk["seq"])
            self.delivered_by_turn.setdefault(turn_id, []).append(chunk["seq"])

    def _new_turn(self, user_id: str, *, pre_admitted: bool = False) -> TurnInfo:
        n = next(self.ids)
        return TurnInfo(
            turn_id=f"t{n}",
            assistant_message_id=f"a{n}",
            user_message_id=user_id,
            config=CONFIG,
            message={"id": user_id, "role": "user", "parts": []},
            pre_admitted=pre_admitted,
        )

    def _create(self, turn: TurnInfo, via: str) -> None:
        before = self.state
        stopped = self.stopped_roll if via == "steer-continuation" else None
        self.apply(TurnCreated(turn, via))  # type: ignore[arg-type]
        execution = self.state.execution
        created = isinstance(execution, TurnExec) and execution.turn.turn_id == turn.turn_id
        if created and stopped is not None:
            self.stopped_turns[turn.turn_id] = stopped
            event("stopped roll continued")
        if self.state is not before and created:
            assert all(t in self.confirmed for t in self.created), "two live turns"
            self.created.append(turn.turn_id)

    # --- rules -----------------------------------------------------------------------------

    @rule(redirect_ok=st.booleans(), same_config=st.booleans(), open_now=st.booleans())
    def submit(self, redirect_ok: bool, same_config: bool, open_now: bool) -> None:
        user_id = f"u{next(self.ids)}"
        if not is_busy(self.state):
            self._create(self._new_turn(user_id), "fresh")
            if open_now:
                self.open_stream()
            return
        self.follow_ups.add(user_id)
        item = FollowUp(
            user_message_id=user_id,
            message={"id": user_id, "role": "user", "parts": []},
            config=CONFIG if same_config else OTHER,
            seq=int(user_id[1:]),
        )
        turn_id = can_redirect(self.state, item.config)
        if turn_id is not None and redirect_ok:
            self.apply(RedirectAccepted(turn_id, item))
            event("redirect accepted")
        else:
            self.apply(QueueFollowUp(item))

    @rule(count=st.integers(min_value=2, max_value=3), same_config=st.booleans())
    def submit_several(self, count: int, same_config: bool) -> None:
        """A burst of messages: the ones that find the session busy wait in the queue."""
        for _ in range(count):
            self.submit(redirect_ok=False, same_config=same_config, open_now=False)

    @rule()
    def runtime_turn(self) -> None:
        """The runtime begins a turn by itself, once it ended the one it was answering: at
        once on an idle session, else it waits (buffered) and goes first once idle."""
        before = self.state
        if _runtime_running(before):
            return  # the runtime cannot (the driver never reports it)
        n = next(self.ids)
        turn = TurnInfo(
            turn_id=f"t{n}",
            assistant_message_id=f"a{n}",
            user_message_id="",
            config=CONFIG,
            message={"id": "", "role": "user", "parts": []},
            pre_admitted=True,
            runtime=True,
        )
        effects = self.apply(RuntimeTurnStarted(turn))
        if is_busy(before):
            assert self.state.waiting[-1].turn == turn or self.state.execution.turn == turn  # type: ignore[union-attr]
            assert self.state.execution == before.execution or isinstance(before.execution, Idle), (
                "a runtime turn never interrupts a live turn"
            )
            event("runtime turn waits")
            return
        assert self.state.launch == "scheduled" and self.state.launch_target == "runtime-turn"
        assert [type(e).__name__ for e in effects] == ["ScheduleLaunch"]
        event("runtime turn")

    @rule()
    def steer_live(self) -> None:
        """A follow-up while a turn streams, which the runtime accepts."""
        self.submit(redirect_ok=True, same_config=True, open_now=True)

    @rule()
    def open_stream(self) -> None:
        execution = self.state.execution
        if isinstance(execution, TurnExec) and execution.phase == "unopened":
            turn = execution.turn
            self.apply(TurnStreamOpened(turn.turn_id))
            if not turn.pre_admitted:
                self.apply(TurnAdmitted(turn.turn_id))

    @rule()
    def chunk(self) -> None:
        seq = next(self.seq)
        self.emitted.append(seq)
        self.apply(RuntimeChunk({"type": "text-delta", "id": "t", "delta": "x", "seq": seq}))
        if self.overflowed:
            event("buffer overflow")

    @rule(status=st.sampled_from(["success", "success", "error"]))
    def runtime_terminal(self, status: str) -> None:
        execution = self.state.execution
        if self.state.waiting:
            newest = self.state.waiting[-1]
            if newest.terminal is None:
                self.reported[newest.turn.turn_id] = status
        elif (
            isinstance(execution, TurnExec)
            and execution.terminal is None
            and execution.phase != "awaiting-persistence"
        ):
            self.reported[execution.turn.turn_id] = status
        elif isinstance(execution, Transition) and execution.terminal is None:
            # it ends the continuation A2 of this roll, once that exists
            self.roll_reported[execution.source.turn_id] = status
        self.apply(RuntimeTerminal(status))  # type: ignore[arg-type]

    @rule(take=st.integers(min_value=1, max_value=3))
    def steer_boundary(self, take: int) -> None:
        execution = self.state.execution
        if isinstance(execution, TurnExec) and execution.folded:
            ids = tuple(f.user_message_id for f in execution.folded[:take])
            self.apply(SteerBoundaryReached(ids))
            event("steer boundary")

    @rule()
    def steer_undelivered(self) -> None:
        execution = self.state.execution
        if isinstance(execution, TurnExec | Transition) and execution.folded:
            self.apply(SteerUndeliveredInputs((execution.folded[0].user_message_id,)))

    @rule(save_failed=RARELY)
    def confirm_terminal(self, save_failed: bool = False) -> None:
        """Persistence confirms the oldest closed turn; a failed save confirms it as error."""
        pending = [t for t in self.created if t in self.closed and t not in self.confirmed]
        pending += [t for t in self.closed if t not in self.confirmed and t not in pending]
        if pending:
            turn_id = pending[0]
            self.confirmed.add(turn_id)
            status = "error" if save_failed else self.closed[turn_id]
            effects = self.apply(TurnTerminal(turn_id, status))  # type: ignore[arg-type]
            if not any(isinstance(e, LogInvalid) for e in effects):  # an unsaved runtime turn
                assert self.state.last_terminal == status

    @rule(take=st.integers(min_value=1, max_value=2), stop_first=st.booleans())
    def roll(self, take: int, stop_first: bool) -> None:
        """A steer accepted mid-turn reaches its boundary: A1a closes, the roll begins (and a
        stop may come before A1a is confirmed)."""
        if not is_busy(self.state):
            self.submit(redirect_ok=True, same_config=True, open_now=True)  # a fresh open turn
        self.steer_live()
        self.steer_boundary(take)
        if stop_first:
            self.stop(keep_queue=False)

    @rule(keep_queue=st.booleans())
    def stop(self, keep_queue: bool) -> None:
        before = self.state
        execution = before.execution
        dropped_before = set(self.dropped_follow_ups)
        if isinstance(execution, Transition) and execution.terminal is None:
            self.stopped_roll = [c["seq"] for c in execution.buffer]
        self.apply(Stopped(keep_queue=keep_queue))
        if isinstance(execution, Transition) and execution.terminal is None:
            after = self.state.execution
            assert isinstance(after, Transition) and after.terminal == ("paused", None)
        # The manager cancels a running source: the turn ends paused.
        if isinstance(execution, TurnExec) and execution.turn.turn_id not in self.closed:
            self.closed[execution.turn.turn_id] = "paused"
        assert self.state.connection == "disconnected"
        queued = [f.user_message_id for f in before.queue]
        rolling = isinstance(execution, Transition) and execution.terminal is None
        runtime_unsaved = before.launch_target == "runtime-turn"
        folded: list[FollowUp] = []
        if isinstance(execution, TurnExec) or (isinstance(execution, Transition) and rolling):
            folded = list(execution.folded)
        newly_dropped = self.dropped_follow_ups - dropped_before
        if keep_queue:
            # the queue stays; the turn's folded steers go back to it, in submission order
            back = sorted([*before.queue, *folded], key=lambda f: f.seq)
            waiting = [f.user_message_id for f in self.state.queue]
            assert waiting == [f.user_message_id for f in back]
            assert not newly_dropped & set(queued)
        else:
            assert self.state.queue == ()
            assert set(queued) | {f.user_message_id for f in folded} <= newly_dropped
            if before.launch == "scheduled" and before.launch_target == "queued-turn":
                assert self.state.launch == "idle"
        if isinstance(execution, TurnExec) and runtime_unsaved:
            assert self.state.execution == Idle()  # nothing was streamed: it ends here
        elif isinstance(execution, TurnExec):
            assert isinstance(self.state.execution, TurnExec)
            assert self.state.execution.phase == "awaiting-persistence"
            assert self.state.execution.folded == ()

    @precondition(lambda self: self.state.launch == "scheduled")
    @rule(succeed=st.booleans(), finish_now=st.booleans(), clear_queue=RARELY)
    def launch(self, succeed: bool, finish_now: bool, clear_queue: bool = False) -> None:
        target = self.state.launch_target
        assert target is not None
        self.apply(LaunchStarted(target))
        if finish_now:
            self.launch_finish(succeed, clear_queue)

    @precondition(lambda self: self.state.launch == "running")
    @rule(succeed=st.booleans(), clear_queue=RARELY)
    def launch_finish(self, succeed: bool, clear_queue: bool = False) -> None:
        """The launch task resumes after its awaits (a stop may have happened meanwhile)."""
        target = self.state.launch_target
        assert target is not None
        if not succeed:
            self._launch_failed(target, clear_queue)
            return
        execution = self.state.execution
        if target == "runtime-turn":
            if not (isinstance(execution, TurnExec) and execution.turn.runtime):
                self.apply(LaunchAbandoned(target))  # stopped while its row was saved
                return
            self._create(execution.turn, "runtime-turn")
            event("runtime turn launched")
            return
        if target == "queued-turn":
            if not self.state.queue:
                self.apply(LaunchAbandoned(target))
                return
            head = self.state.queue[0]
            self._create(self._new_turn(head.user_message_id), "queued-turn")
            self.answered.add(head.user_message_id)
        else:
            assert isinstance(execution, Transition)
            turn = self._new_turn(execution.inputs[-1].user_message_id, pre_admitted=True)
            self._create(turn, "steer-continuation")
            if execution.source.turn_id in self.roll_reported:
                self.reported[turn.turn_id] = self.roll_reported[execution.source.turn_id]
            self.answered.update(f.user_message_id for f in execution.inputs)
            event("steer continuation launched")

    def _launch_failed(self, target: LaunchTarget, clear_queue: bool) -> None:
        before = self.state
        dropped_before = set(self.dropped_follow_ups)
        effects = self.apply(LaunchFailed(target, clear_queue=clear_queue, error={"name": "E"}))
        assert TerminateHeld({"name": "E"}) in effects
        assert self.state.last_terminal == "error"
        newly_dropped = self.dropped_follow_ups - dropped_before
        queued = [f.user_message_id for f in before.queue]
        waiting = [f.user_message_id for f in self.state.queue]
        event(f"{target} launch failed with {min(len(queued), 2)}+ queued")
        if target == "runtime-turn":
            # the runtime's own turn is gone; nothing queued is touched
            assert newly_dropped == set() and isinstance(self.state.execution, Idle)
            assert waiting == queued
        elif target == "steer-continuation":
            # the roll is over: its steers and everything queued behind them are dropped
            execution = before.execution
            assert isinstance(execution, Transition)
            lost = {f.user_message_id for f in (*execution.inputs, *execution.folded)}
            assert newly_dropped == lost | set(queued)
            assert waiting == [] and isinstance(self.state.execution, Idle)
        elif clear_queue:
            assert newly_dropped == set(queued) and waiting == []
        else:
            # only the head whose launch failed is dropped; the rest waits for the next launch
            assert newly_dropped == set(queued[:1])
            assert waiting == queued[1:]
            expected_launch = "scheduled" if waiting and not self.state.compacting else "idle"
            if isinstance(self.state.execution, Idle):
                assert self.state.launch == expected_launch

    @rule(anchor=st.booleans())
    def compaction(self, anchor: bool) -> None:
        if not self.state.compacting:
            self.apply(CompactionStarted())
            return
        if anchor:
            seq = next(self.seq)
            self.emitted.append(seq)
            self.apply(CompactionEnded({"type": "data-compaction-anchor", "seq": seq}))
        else:
            self.apply(CompactionEnded())
            self.apply(CompactionEnded())  # settling is idempotent

    @rule(lose=st.booleans())
    def connection(self, lose: bool) -> None:
        attempt = next(self.ids)
        if self.state.connection == "disconnected":
            self.apply(ConnectionStarted(attempt))
            self.apply(ConnectionOpened(attempt))
        elif lose:
            self.apply(ConnectionLost(self.state.attempt))

    @rule()
    def idle(self) -> None:
        before = self.state
        effects = self.apply(IdleExpired())
        if before.connection == "connected" and not is_busy(before):
            assert self.state.connection == "disconnected"
            assert [type(e).__name__ for e in effects] == ["CloseConnection", "SessionOnIdle"]
        else:
            assert self.state == before, "idle expiry never touches a busy or closed session"

    # --- invariants --------------------------------------------------------------------------

    @invariant()
    def one_live_turn(self) -> None:
        live = [t for t in self.created if t not in self.confirmed]
        assert len(live) <= 1, live

    @invariant()
    def chunks_once_and_in_order(self) -> None:
        assert self.delivered == sorted(set(self.delivered)), "duplicate or out of order"
        buffered: list[int] = []
        execution = self.state.execution
        if isinstance(execution, TurnExec | Transition):
            buffered = [c["seq"] for c in execution.buffer]
            assert len(buffered) <= BUFFER_LIMIT, "a buffer grew past its bound"
        for waiting in self.state.waiting:
            assert len(waiting.buffer) <= BUFFER_LIMIT, "a buffer grew past its bound"
            buffered += [c["seq"] for c in waiting.buffer]
        accounted = sorted(self.delivered + self.dropped_chunks + buffered)
        assert accounted == self.emitted, (accounted, self.emitted)

    @invariant()
    def no_follow_up_lost(self) -> None:
        places: list[str] = [f.user_message_id for f in self.state.queue]
        execution = self.state.execution
        if isinstance(execution, TurnExec | Transition):
            places += [f.user_message_id for f in execution.folded]
        if isinstance(execution, Transition):
            places += [f.user_message_id for f in execution.inputs]
        places += list(self.answered) + list(self.dropped_follow_ups)
        assert sorted(places) == sorted(self.follow_ups), (places, self.follow_ups)

    @invariant()
    def follow_ups_keep_their_order(self) -> None:
        waiting = [int(f.user_message_id[1:]) for f in self.state.queue]
        assert waiting == sorted(waiting), waiting

    @invariant()
    def a_continuation_launch_belongs_to_a_settled_roll(self) -> None:
        # so a roll abandoned before its source settled has no launch and nothing held to end
        if self.state.launch_target == "steer-continuation":
            execution = self.state.execution
            assert isinstance(execution, Transition) and execution.source_settled

    @invariant()
    def busy_iff_runtime_state(self) -> None:
        expected = (
            self.state.compacting
            or self.state.launch != "idle"
            or bool(self.state.queue)
            or not isinstance(self.state.execution, Idle)
        )
        assert is_busy(self.state) == expected

    def teardown(self) -> None:
        # Drive the session to rest: every created turn must get its terminal.
        for _ in range(2000):  # bounded: every queued follow-up takes a few steps
            if self.state.compacting:
                self.apply(CompactionEnded())
            execution = self.state.execution
            if self.state.waiting and self.state.waiting[-1].terminal is None:
                self.runtime_terminal("success")
            elif self.state.launch == "scheduled":
                self.launch(True, True)
            elif self.state.launch == "running":
                self.launch_finish(True)
            elif isinstance(execution, TurnExec) and execution.phase == "unopened":
                self.open_stream()
            elif (
                isinstance(execution, TurnExec)
                and execution.turn.turn_id not in self.closed
                and self.state.waiting
            ):
                # A fresh turn raced a runtime turn: its send fails, its source raises.
                self.closed[execution.turn.turn_id] = "error"
            elif isinstance(execution, TurnExec) and execution.turn.turn_id not in self.closed:
                self.runtime_terminal("success")
            elif any(t not in self.confirmed for t in self.closed) or (
                isinstance(execution, Transition) and not execution.source_settled
            ):
                self.confirm_terminal()
            else:
                break
        assert isinstance(self.state.execution, Idle), self.state
        assert not self.state.queue and self.state.launch == "idle" and not self.state.waiting
        assert all(t in self.confirmed for t in self.created)
        assert all(self.closed[t] == "paused" for t in self.stopped_turns)
        self.no_follow_up_lost()
        self.chunks_once_and_in_order()


def _runtime_running(state: SessionState) -> bool:
    """Whether the runtime still answers a turn (it ended none since it was given or began it)."""
    if state.waiting:
        return state.waiting[-1].terminal is None
    execution = state.execution
    if isinstance(execution, TurnExec):
        return execution.terminal is None and execution.admission == "admitted"
    return isinstance(execution, Transition) and execution.terminal is None


SessionMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("DRUPE_MACHINE_EXAMPLES", "150")),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_session_reducer = SessionMachine.TestCase


# --- rules the machine reaches rarely, case by case --------------------------------------------


def _follow_up(user_id: str, seq: int) -> FollowUp:
    return FollowUp(
        user_message_id=user_id,
        message={"id": user_id, "role": "user", "parts": []},
        config=CONFIG,
        seq=seq,
    )


def _turn(turn_id: str, user_id: str) -> TurnInfo:
    return TurnInfo(
        turn_id=turn_id,
        assistant_message_id=f"a-{turn_id}",
        user_message_id=user_id,
        config=CONFIG,
        message={"id": user_id, "role": "user", "parts": []},
    )


def _rolling(*, settled: bool) -> tuple[SessionState, FollowUp, FollowUp, FollowUp]:
    """A1a rolled into A2 at a steer boundary: u2 is the roll's input, u3 was folded into the
    roll, u4 waits in the queue; one chunk is buffered for A2."""
    u2, u3, u4 = _follow_up("u2", 2), _follow_up("u3", 3), _follow_up("u4", 4)
    transition = Transition(
        source=_turn("t1", "u1"),
        source_settled=settled,
        inputs=(u2,),
        folded=(u3,),
        buffer=({"type": "text-delta", "id": "x", "delta": "A2"},),
    )
    state = SessionState(
        execution=transition,
        queue=(u4,),
        launch="scheduled" if settled else "idle",
        launch_target="steer-continuation" if settled else None,
    )
    return state, u2, u3, u4


def test_a_stop_during_the_roll_ends_the_continuation_paused_with_its_buffer() -> None:
    state, u2, u3, u4 = _rolling(settled=True)
    after, effects = reduce(state, Stopped())
    # A2 still gets its row: the roll keeps its input and buffer and latches a user stop
    assert after.execution == Transition(
        source=_turn("t1", "u1"),
        source_settled=True,
        inputs=(u2,),
        buffer=({"type": "text-delta", "id": "x", "delta": "A2"},),
        terminal=("paused", None),
    )
    assert after.queue == () and after.connection == "disconnected"
    assert (after.launch, after.launch_target) == ("scheduled", "steer-continuation")
    assert effects == [
        CloseConnection("stop"),
        DropQueued((u4,), "stopped"),
        DropQueued((u3,), "stopped"),
    ]


def test_a_roll_source_that_ends_in_error_abandons_the_roll_and_launches_the_queue() -> None:
    state, u2, u3, u4 = _rolling(settled=False)
    after, effects = reduce(state, TurnTerminal("t1", "error"))
    assert after.execution == Idle() and after.last_terminal == "error"
    # the queue survives the abandoned roll: its head is launched next
    assert after.queue == (u4,)
    assert (after.launch, after.launch_target) == ("scheduled", "queued-turn")
    assert effects == [
        DropBuffer(({"type": "text-delta", "id": "x", "delta": "A2"},), "roll abandoned"),
        DropQueued((u2, u3), "roll abandoned"),
        ScheduleLaunch("queued-turn"),
    ]


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (SessionState(), False),
        (SessionState(compacting=True), True),
        (SessionState(queue=(_follow_up("u2", 2),)), True),
        (SessionState(launch="scheduled", launch_target="queued-turn"), True),
        (SessionState(launch="running", launch_target="steer-continuation"), True),
        (SessionState(execution=TurnExec(turn=_turn("t1", "u1"))), False),
        (SessionState(execution=Transition(source=_turn("t1", "u1"), inputs=())), True),
        # a runtime turn waits behind the closing turn: its subscribers stay for it
        (
            SessionState(
                execution=TurnExec(turn=_turn("t1", "u1"), phase="awaiting-persistence"),
                waiting=(TurnExec(turn=replace(_turn("t2", ""), runtime=True)),),
            ),
            True,
        ),
    ],
)
def test_a_finished_stream_is_held_open_only_for_a_runtime_driven_successor(
    state: SessionState, expected: bool
) -> None:
    assert will_continue(state) is expected


def _open_turn(**changes: Any) -> SessionState:
    """A session whose turn t1 streams (open, admitted, no terminal), with ``changes`` applied
    to the turn's execution or, for ``queue``, to the session."""
    queue = changes.pop("queue", ())
    headless = changes.pop("headless", False)
    turn = replace(_turn("t1", "u1"), headless=headless)
    fields: dict[str, Any] = {"phase": "open", "admission": "admitted", **changes}
    execution = TurnExec(turn=turn, **fields)
    return SessionState(execution=execution, queue=queue)


@pytest.mark.parametrize(
    ("state", "config", "expected"),
    [
        (_open_turn(), CONFIG, "t1"),
        (_open_turn(), OTHER, None),  # another model or options: its own turn
        (_open_turn(phase="unopened"), CONFIG, None),
        (_open_turn(phase="awaiting-persistence"), CONFIG, None),
        (_open_turn(admission="pending"), CONFIG, None),
        (_open_turn(terminal=("success", None)), CONFIG, None),
        (_open_turn(headless=True), CONFIG, None),
        (_open_turn(queue=(_follow_up("u2", 2),)), CONFIG, None),  # never jump the queue
        (SessionState(), CONFIG, None),
    ],
)
def test_a_follow_up_is_redirected_only_into_a_live_admitted_turn_with_its_config(
    state: SessionState, config: TurnConfig, expected: str | None
) -> None:
    assert can_redirect(state, config) == expected


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (SessionState(), False),
        (SessionState(compacting=True), True),
        (SessionState(queue=(_follow_up("u2", 2),)), True),
        (SessionState(launch="scheduled", launch_target="steer-continuation"), True),
        (SessionState(launch="running", launch_target="queued-turn"), True),
        (_open_turn(), True),
        (SessionState(execution=Transition(source=_turn("t1", "u1"), inputs=())), True),
        # a runtime turn waits behind the closing turn: its subscribers stay for it
        (
            SessionState(
                execution=TurnExec(turn=_turn("t1", "u1"), phase="awaiting-persistence"),
                waiting=(TurnExec(turn=replace(_turn("t2", ""), runtime=True)),),
            ),
            True,
        ),
    ],
)
def test_a_session_is_busy_while_anything_runs_or_waits(
    state: SessionState, expected: bool
) -> None:
    assert is_busy(state) is expected


def test_a_turn_config_is_its_model_and_its_options_sorted() -> None:
    config = turn_config("m1", temperature=0.2, effort="high")
    assert config == TurnConfig(model_id="m1", extra=(("effort", "high"), ("temperature", 0.2)))
    assert turn_config("m1", effort="high", temperature=0.2) == config
    assert turn_config("m2", effort="high", temperature=0.2) != config
    assert turn_config("m1") == TurnConfig(model_id="m1", extra=())


@pytest.mark.parametrize(
    ("clear_queue", "left"),
    [(False, ("u3", "u4")), (True, ())],
)
def test_a_failed_queued_launch_drops_its_head_or_with_clear_queue_all(
    clear_queue: bool, left: tuple[str, ...]
) -> None:
    queue = (_follow_up("u2", 2), _follow_up("u3", 3), _follow_up("u4", 4))
    state = SessionState(queue=queue, launch="running", launch_target="queued-turn")
    after, effects = reduce(state, LaunchFailed("queued-turn", clear_queue, {"name": "E"}))
    dropped = queue if clear_queue else queue[:1]
    assert [f.user_message_id for f in after.queue] == list(left)
    assert effects[:2] == [TerminateHeld({"name": "E"}), DropQueued(dropped, "launch failed")]
    # the rest waits for the next launch
    expected = ("scheduled", "queued-turn") if left else ("idle", None)
    assert (after.launch, after.launch_target) == expected
