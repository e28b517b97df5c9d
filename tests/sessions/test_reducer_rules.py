"""Rule tables for the agent-session reducer: one row per branch of ``reduce``.

Each row is a hand-written state, one event, and the exact state and effects expected from the
host's rules (``drupe.sessions.state``'s docstring and reference §6.6), written out in full
rather than derived from the reducer. The state machine (``test_reducer_machine.py``) plays a
correct shell; these rows also send the events a correct shell never sends in that state (out
of order, stale, for another turn), which the reducer must refuse with a ``LogInvalid`` and
leave the state untouched, and they pin the rare paths (a failed continuation launch, a stop of
an unsaved runtime turn, a buffer overflow during the roll) to their exact effects.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

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
    LogInvalid,
    ScheduleLaunch,
    SessionOnIdle,
    SessionState,
    TerminateHeld,
    Transition,
    TurnExec,
    TurnInfo,
    turn_config,
)

CONFIG = turn_config("m1")
E = {"name": "E", "message": "boom"}


def fu(n: int, *, headless: bool = False) -> FollowUp:
    """Follow-up ``u<n>``, submitted ``n``-th."""
    return FollowUp(
        user_message_id=f"u{n}",
        message={"id": f"u{n}", "role": "user", "parts": []},
        config=CONFIG,
        headless=headless,
        seq=n,
    )


def turn(n: int, **changes: Any) -> TurnInfo:
    """Turn ``t<n>`` answering ``u<n>``."""
    return TurnInfo(
        turn_id=f"t{n}",
        assistant_message_id=f"a{n}",
        user_message_id=f"u{n}",
        config=CONFIG,
        message={"id": f"u{n}", "role": "user", "parts": []},
        **changes,
    )


def c(n: int) -> dict[str, Any]:
    return {"type": "text-delta", "id": "t", "delta": "x", "seq": n}


def ex(n: int = 1, **changes: Any) -> TurnExec:
    return TurnExec(turn=turn(n), **changes)


OPEN = ex(1, phase="open", admission="admitted")
RUNTIME = turn(5, pre_admitted=True, runtime=True)
LIVE = SessionState(connection="connected", attempt=7, buffer_limit=3)
"""A connected, idle session; small buffers. Every row starts from it."""


def at(**changes: Any) -> SessionState:
    return replace(LIVE, **changes)


def roll(**changes: Any) -> Transition:
    """A1a (t1) rolling into A2: u2 is the roll's input."""
    fields: dict[str, Any] = {"source": turn(1), "inputs": (fu(2),), **changes}
    return Transition(**fields)


CLOSING = ex(1, phase="awaiting-persistence", admission="admitted", terminal=("success", None))
"""A user turn the runtime ended, while persistence is still writing it."""
W5 = TurnExec(turn=RUNTIME, admission="admitted")
"""The runtime's own turn t5, waiting for the session to be idle."""
W5_ENDED = replace(W5, buffer=(c(1),), terminal=("success", None))
RUNTIME6 = turn(6, pre_admitted=True, runtime=True)
W6 = TurnExec(turn=RUNTIME6, admission="admitted")
W6_ENDED = replace(W6, terminal=("success", None))
W7 = TurnExec(turn=turn(7, pre_admitted=True, runtime=True), admission="admitted")

QUEUED_RUNNING = at(queue=(fu(2), fu(3)), launch="running", launch_target="queued-turn")

ENDING_LAUNCH: list[tuple[str, Event, Event]] = [
    ("abandon", LaunchAbandoned("queued-turn"), LaunchAbandoned("runtime-turn")),
    ("fail", LaunchFailed("queued-turn", False, E), LaunchFailed("runtime-turn", False, E)),
]
"""The events that end a running launch: for its target, and for another."""


def check(state: SessionState, event: Event, expected: SessionState, effects: list[Effect]) -> None:
    assert reduce(state, event) == (expected, effects)


# --- events that do not fit the state: refused, logged, nothing changes ------------------------

REFUSED: list[tuple[str, SessionState, Event, str]] = [
    # a fresh turn only on an idle session
    ("fresh-queue", at(queue=(fu(2),)), TurnCreated(turn(3)), "a fresh turn on a busy session"),
    ("fresh-exec", at(execution=OPEN), TurnCreated(turn(3)), "a fresh turn on a busy session"),
    ("fresh-compact", at(compacting=True), TurnCreated(turn(3)), "a fresh turn on a busy session"),
    # a queued turn only from the running queued-turn launch, for the head of the queue
    *[
        (
            f"queued-{name}",
            state,
            TurnCreated(turn(head), "queued-turn"),
            "no running queued-turn launch for this row",
        )
        for name, state, head in [
            (
                "scheduled",
                at(queue=(fu(2), fu(3)), launch="scheduled", launch_target="queued-turn"),
                2,
            ),
            (
                "target",
                at(queue=(fu(2), fu(3)), launch="running", launch_target="steer-continuation"),
                2,
            ),
            ("busy", replace(QUEUED_RUNNING, execution=OPEN), 2),
            ("empty", replace(QUEUED_RUNNING, queue=()), 2),
            ("not-head", QUEUED_RUNNING, 3),
        ]
    ],
    # the continuation only from the running steer-continuation launch of a settled roll
    *[
        (
            f"continuation-{name}",
            at(
                execution=roll(source_settled=settled),
                launch=launch,
                launch_target=target,
            )
            if name != "not-a-roll"
            else at(execution=OPEN, launch="running", launch_target="steer-continuation"),
            TurnCreated(turn(2, pre_admitted=pre), "steer-continuation"),
            "no running steer-continuation launch",
        )
        for name, settled, launch, target, pre in [
            ("scheduled", True, "scheduled", "steer-continuation", True),
            ("target", True, "running", "queued-turn", True),
            ("not-a-roll", True, "running", "steer-continuation", True),
            ("unsettled", False, "running", "steer-continuation", True),
            ("not-pre-admitted", True, "running", "steer-continuation", False),
        ]
    ],
    # a runtime turn is its own, pre-admitted
    *[
        (
            f"runtime-{name}",
            LIVE,
            RuntimeTurnStarted(t),
            "not a runtime-initiated, pre-admitted turn",
        )
        for name, t in [
            ("not-runtime", replace(RUNTIME, runtime=False)),
            ("not-pre-admitted", replace(RUNTIME, pre_admitted=False)),
        ]
    ],
    # the runtime begins a turn only once it ended the one it was answering
    *[
        (
            f"runtime-while-running-{name}",
            state,
            RuntimeTurnStarted(RUNTIME6),
            "a runtime turn while the runtime's turn is running",
        )
        for name, state in [
            ("open", at(execution=OPEN)),
            ("unopened-admitted", at(execution=ex(1, admission="admitted"))),
            ("roll", at(execution=roll())),
            ("waiting", at(execution=CLOSING, waiting=(W5,))),
            ("waiting-newest", at(execution=CLOSING, waiting=(W5_ENDED, W5))),
        ]
    ],
    # the runtime turn's row is saved only by its own running launch, before it opened
    *[
        (
            f"runtime-created-{name}",
            state,
            TurnCreated(t, "runtime-turn"),
            "no running runtime-turn launch for this turn",
        )
        for name, state, t in [
            (
                "scheduled",
                at(
                    execution=TurnExec(turn=RUNTIME),
                    launch="scheduled",
                    launch_target="runtime-turn",
                ),
                RUNTIME,
            ),
            (
                "target",
                at(execution=TurnExec(turn=RUNTIME), launch="running", launch_target="queued-turn"),
                RUNTIME,
            ),
            ("gone", at(launch="running", launch_target="runtime-turn"), RUNTIME),
            (
                "other-turn",
                at(
                    execution=TurnExec(turn=RUNTIME), launch="running", launch_target="runtime-turn"
                ),
                turn(6, pre_admitted=True, runtime=True),
            ),
            (
                "opened",
                at(
                    execution=TurnExec(turn=RUNTIME, phase="open"),
                    launch="running",
                    launch_target="runtime-turn",
                ),
                RUNTIME,
            ),
        ]
    ],
    # a stream opens once, for the live unopened turn whose row exists
    *[
        (f"open-{name}", state, TurnStreamOpened(turn_id), "no unopened turn with this id")
        for name, state, turn_id in [
            ("idle", LIVE, "t1"),
            ("other", at(execution=ex(1)), "t2"),
            ("twice", at(execution=OPEN), "t1"),
            ("closed", at(execution=ex(1, phase="awaiting-persistence")), "t1"),
            ("roll", at(execution=roll()), "t1"),
            (
                "unsaved-runtime",
                at(
                    execution=TurnExec(turn=RUNTIME), launch="running", launch_target="runtime-turn"
                ),
                "t5",
            ),
        ]
    ],
    ("admit-idle", LIVE, TurnAdmitted("t1"), "no turn with this id"),
    ("admit-other", at(execution=ex(1)), TurnAdmitted("t2"), "no turn with this id"),
    ("admit-roll", at(execution=roll()), TurnAdmitted("t1"), "no turn with this id"),
    # runtime terminals
    (
        "terminal-roll-twice",
        at(execution=roll(terminal=("success", None))),
        RuntimeTerminal("error", E),
        "a second runtime terminal during the roll",
    ),
    ("terminal-idle", LIVE, RuntimeTerminal("success"), "a runtime terminal without a live turn"),
    (
        "terminal-waiting-twice",
        at(execution=OPEN, waiting=(W5_ENDED,)),
        RuntimeTerminal("error", E),
        "a runtime terminal without a live turn",
    ),
    (
        "terminal-twice",
        at(execution=ex(1, terminal=("success", None))),
        RuntimeTerminal("error", E),
        "a runtime terminal without a live turn",
    ),
    (
        "terminal-closed",
        at(execution=ex(1, phase="awaiting-persistence")),
        RuntimeTerminal("success"),
        "the turn's stream already closed",
    ),
    # persistence confirmations
    (
        "settled-twice",
        at(
            execution=roll(source_settled=True),
            launch="running",
            launch_target="steer-continuation",
        ),
        TurnTerminal("t1", "success"),
        "the roll's source settled twice",
    ),
    ("confirm-idle", LIVE, TurnTerminal("t1", "success"), "no turn with this id"),
    ("confirm-other", at(execution=OPEN), TurnTerminal("t2", "success"), "no turn with this id"),
    (
        "confirm-not-source",
        at(execution=roll()),
        TurnTerminal("t2", "error"),
        "no turn with this id",
    ),
    # steer boundaries
    *[
        (f"boundary-{name}", at(execution=e), SteerBoundaryReached(("u2",)), reason)
        for name, e, reason in [
            ("idle", Idle(), "steer-boundary outside an open turn"),
            ("unopened", ex(1, folded=(fu(2),)), "steer-boundary outside an open turn"),
            (
                "closed",
                ex(1, phase="awaiting-persistence", folded=(fu(2),)),
                "steer-boundary outside an open turn",
            ),
            (
                "ended",
                replace(OPEN, terminal=("success", None), folded=(fu(2),)),
                "steer-boundary outside an open turn",
            ),
            ("roll", roll(folded=(fu(2),)), "steer-boundary outside an open turn"),
            (
                "not-taken",
                replace(OPEN, folded=(fu(3),)),
                "steer-boundary for steers this turn never took",
            ),
        ]
    ],
    ("undelivered-idle", LIVE, SteerUndeliveredInputs(("u2",)), "steer-undelivered without a turn"),
    # launches move scheduled -> running -> idle, for their own target only
    *[
        (f"start-{name}", state, event, "no launch scheduled for this target")
        for name, state, event in [
            ("idle", LIVE, LaunchStarted("queued-turn")),
            (
                "running",
                at(launch="running", launch_target="queued-turn"),
                LaunchStarted("queued-turn"),
            ),
            (
                "target",
                at(launch="scheduled", launch_target="queued-turn"),
                LaunchStarted("runtime-turn"),
            ),
        ]
    ],
    *[
        (f"{kind}-{name}", state, event, "no running launch for this target")
        for kind, queued, other in ENDING_LAUNCH
        for name, state, event in [
            ("idle", LIVE, queued),
            ("scheduled", at(launch="scheduled", launch_target="queued-turn"), queued),
            ("target", at(launch="running", launch_target="queued-turn"), other),
        ]
    ],
    # idle expiry and the connection
    ("idle-busy", at(queue=(fu(2),)), IdleExpired(), "idle expiry on a busy or closed session"),
    ("idle-exec", at(execution=OPEN), IdleExpired(), "idle expiry on a busy or closed session"),
    (
        "idle-closed",
        at(connection="disconnected"),
        IdleExpired(),
        "idle expiry on a busy or closed session",
    ),
    ("connect-open", LIVE, ConnectionStarted(8), "a connect while connecting or connected"),
    (
        "connect-twice",
        at(connection="connecting"),
        ConnectionStarted(8),
        "a connect while connecting or connected",
    ),
    ("opened-stale", at(connection="connecting"), ConnectionOpened(6), "a stale connect finished"),
    ("opened-twice", LIVE, ConnectionOpened(7), "a stale connect finished"),
    (
        "opened-closed",
        at(connection="disconnected"),
        ConnectionOpened(7),
        "a stale connect finished",
    ),
]


@pytest.mark.parametrize(
    ("state", "event", "reason"),
    [pytest.param(s, e, r, id=i) for i, s, e, r in REFUSED],
)
def test_an_event_that_does_not_fit_the_state_is_refused_and_changes_nothing(
    state: SessionState, event: Event, reason: str
) -> None:
    check(state, event, state, [LogInvalid(type(event).__name__, reason)])


def test_an_unknown_event_is_refused() -> None:
    assert reduce(LIVE, object()) == (LIVE, [LogInvalid("object", "unknown event")])  # type: ignore[arg-type]


# --- events that fit: the exact next state and effects -----------------------------------------

OVERFLOW = {
    "name": "BufferOverflow",
    "message": "more than 3 chunks arrived before the answer's stream opened; the turn was ended",
}
A2 = turn(2, pre_admitted=True)
CONTINUING = at(
    execution=roll(source_settled=True, buffer=(c(1),), terminal=("error", E), folded=(fu(3),)),
    queue=(fu(4),),
    launch="running",
    launch_target="steer-continuation",
)
RUNTIME_LAUNCH = at(
    execution=TurnExec(turn=RUNTIME, admission="admitted", buffer=(c(1),)),
    queue=(fu(2),),
    launch="running",
    launch_target="runtime-turn",
)
SCHEDULE = ScheduleLaunch("queued-turn")

ACCEPTED: list[tuple[str, SessionState, Event, SessionState, list[Effect]]] = [
    # turns begin
    ("fresh", LIVE, TurnCreated(turn(1)), at(execution=ex(1)), []),
    (
        "queued",
        QUEUED_RUNNING,
        TurnCreated(turn(2), "queued-turn"),
        at(execution=ex(2), queue=(fu(3),)),
        [],
    ),
    (
        "continuation",
        CONTINUING,
        TurnCreated(A2, "steer-continuation"),
        # A2 takes over the roll's buffer, latched terminal and folded steers, pre-admitted
        at(
            execution=TurnExec(
                turn=A2,
                admission="admitted",
                buffer=(c(1),),
                terminal=("error", E),
                folded=(fu(3),),
            ),
            queue=(fu(4),),
        ),
        [],
    ),
    (
        "runtime-started",
        LIVE,
        RuntimeTurnStarted(RUNTIME),
        at(
            execution=TurnExec(turn=RUNTIME, admission="admitted"),
            launch="scheduled",
            launch_target="runtime-turn",
        ),
        [ScheduleLaunch("runtime-turn")],
    ),
    # a runtime turn on a busy session waits, buffered, and goes first once it is idle
    *[
        (f"runtime-waits-{name}", state, RuntimeTurnStarted(t), replace(state, waiting=w), [])
        for name, state, t, w in [
            ("closing", at(execution=CLOSING), RUNTIME, (W5,)),
            ("unopened-pending", at(execution=ex(1)), RUNTIME, (W5,)),
            (
                "latched",
                at(execution=ex(1, admission="admitted", terminal=("success", None))),
                RUNTIME,
                (W5,),
            ),
            (
                "roll-ended",
                at(execution=roll(terminal=("success", None)), queue=(fu(4),)),
                RUNTIME,
                (W5,),
            ),
            (
                "launching",
                at(queue=(fu(2),), launch="scheduled", launch_target="queued-turn"),
                RUNTIME,
                (W5,),
            ),
            ("compacting", at(compacting=True), RUNTIME, (W5,)),
            ("behind", at(execution=CLOSING, waiting=(W5_ENDED,)), RUNTIME6, (W5_ENDED, W6)),
        ]
    ],
    (
        "runtime-ahead-of-queue",
        at(queue=(fu(2),)),
        RuntimeTurnStarted(RUNTIME),
        at(execution=W5, queue=(fu(2),), launch="scheduled", launch_target="runtime-turn"),
        [ScheduleLaunch("runtime-turn")],
    ),
    (
        "waiting-chunk",
        at(execution=CLOSING, waiting=(W5_ENDED, replace(W6, buffer=(c(1),)))),
        RuntimeChunk(c(2)),
        at(execution=CLOSING, waiting=(W5_ENDED, replace(W6, buffer=(c(1), c(2))))),
        [],
    ),
    (
        "waiting-chunk-first",
        at(execution=OPEN, waiting=(W5,)),
        RuntimeChunk(c(1)),
        at(execution=OPEN, waiting=(replace(W5, buffer=(c(1),)),)),
        [],
    ),
    (
        "waiting-chunk-overflow",
        at(execution=CLOSING, waiting=(W5_ENDED, replace(W6, buffer=(c(1), c(2), c(3))))),
        RuntimeChunk(c(4)),
        at(
            execution=CLOSING,
            waiting=(
                W5_ENDED,
                replace(W6, buffer=(c(1), c(2), c(3)), terminal=("error", OVERFLOW)),
            ),
            connection="disconnected",
        ),
        [DropBuffer((c(4),), "buffer overflow"), CloseConnection("buffer overflow")],
    ),
    (
        "waiting-chunk-overflow-third",  # only the newest waiting turn ends
        at(execution=CLOSING, waiting=(W5_ENDED, W6_ENDED, replace(W7, buffer=(c(1), c(2), c(3))))),
        RuntimeChunk(c(4)),
        at(
            execution=CLOSING,
            waiting=(
                W5_ENDED,
                W6_ENDED,
                replace(W7, buffer=(c(1), c(2), c(3)), terminal=("error", OVERFLOW)),
            ),
            connection="disconnected",
        ),
        [DropBuffer((c(4),), "buffer overflow"), CloseConnection("buffer overflow")],
    ),
    (
        "waiting-chunk-ended",
        at(execution=OPEN, waiting=(W5_ENDED,)),
        RuntimeChunk(c(4)),
        at(execution=OPEN, waiting=(W5_ENDED,)),
        [DropBuffer((c(4),), "no live turn")],
    ),
    (
        "waiting-terminal",
        at(execution=OPEN, waiting=(W5_ENDED, replace(W6, buffer=(c(2),)))),
        RuntimeTerminal("error", E),
        at(
            execution=OPEN,
            waiting=(W5_ENDED, replace(W6, buffer=(c(2),), terminal=("error", E))),
        ),
        [],
    ),
    (
        "waiting-terminal-only",
        at(execution=CLOSING, waiting=(W5,)),
        RuntimeTerminal("success"),
        at(execution=CLOSING, waiting=(replace(W5, terminal=("success", None)),)),
        [],
    ),
    (
        "confirmed-waiting-first",
        at(execution=CLOSING, waiting=(W5_ENDED, W6), queue=(fu(2),)),
        TurnTerminal("t1", "success"),
        at(
            execution=W5_ENDED,
            waiting=(W6,),
            queue=(fu(2),),
            launch="scheduled",
            launch_target="runtime-turn",
            last_terminal="success",
        ),
        [ScheduleLaunch("runtime-turn")],
    ),
    (
        "confirmed-waiting-compacting",
        at(execution=CLOSING, waiting=(W5_ENDED,), compacting=True),
        TurnTerminal("t1", "success"),
        at(waiting=(W5_ENDED,), compacting=True, last_terminal="success"),
        [],
    ),
    (
        "compaction-ended-waiting",
        at(waiting=(W5_ENDED,), compacting=True, queue=(fu(2),)),
        CompactionEnded(),
        at(
            execution=W5_ENDED,
            queue=(fu(2),),
            launch="scheduled",
            launch_target="runtime-turn",
        ),
        [ScheduleLaunch("runtime-turn")],
    ),
    (
        "failed-clear-queue-waiting",
        at(launch="running", launch_target="queued-turn", queue=(fu(2),), waiting=(W5_ENDED,)),
        LaunchFailed("queued-turn", True, E),
        at(
            execution=W5_ENDED,
            launch="scheduled",
            launch_target="runtime-turn",
            last_terminal="error",
        ),
        [TerminateHeld(E), DropQueued((fu(2),), "launch failed"), ScheduleLaunch("runtime-turn")],
    ),
    (
        "failed-continuation-waiting",
        replace(CONTINUING, waiting=(W5_ENDED,)),
        LaunchFailed("steer-continuation", False, E),
        at(
            execution=W5_ENDED,
            launch="scheduled",
            launch_target="runtime-turn",
            last_terminal="error",
        ),
        [
            TerminateHeld(E),
            DropBuffer((c(1),), "continuation failed to launch"),
            DropQueued((fu(2), fu(3), fu(4)), "continuation failed to launch"),
            ScheduleLaunch("runtime-turn"),
        ],
    ),
    (
        "runtime-created",
        RUNTIME_LAUNCH,
        TurnCreated(RUNTIME, "runtime-turn"),
        at(execution=RUNTIME_LAUNCH.execution, queue=(fu(2),)),
        [],
    ),
    # streams open: the buffer first, then a latched terminal closes it at once
    ("open", at(execution=ex(1)), TurnStreamOpened("t1"), at(execution=ex(1, phase="open")), []),
    (
        "open-admitted",
        at(execution=ex(1, admission="admitted"), launch="scheduled", launch_target="queued-turn"),
        TurnStreamOpened("t1"),
        at(
            execution=ex(1, phase="open", admission="admitted"),
            launch="scheduled",
            launch_target="queued-turn",
        ),
        [],
    ),
    (
        "open-buffered",
        at(execution=ex(1, buffer=(c(1), c(2)))),
        TurnStreamOpened("t1"),
        at(execution=ex(1, phase="open")),
        [DeliverBuffer("t1", (c(1), c(2)))],
    ),
    (
        "open-latched",
        at(execution=ex(1, terminal=("success", None))),
        TurnStreamOpened("t1"),
        at(execution=ex(1, phase="awaiting-persistence", terminal=("success", None))),
        [CloseStream("t1", "success", None)],
    ),
    (
        "open-buffered-latched",
        at(execution=ex(1, buffer=(c(1),), terminal=("error", E))),
        TurnStreamOpened("t1"),
        at(execution=ex(1, phase="awaiting-persistence", terminal=("error", E))),
        [DeliverBuffer("t1", (c(1),)), CloseStream("t1", "error", E)],
    ),
    ("admitted", at(execution=OPEN), TurnAdmitted("t1"), at(execution=OPEN), []),
    (
        "admitted-pending",
        at(execution=ex(1, phase="open")),
        TurnAdmitted("t1"),
        at(execution=OPEN),
        [],
    ),
    # chunks: the open turn, else a buffer (bounded), else dropped
    (
        "chunk-open",
        at(execution=OPEN),
        RuntimeChunk(c(1)),
        at(execution=OPEN),
        [Forward("t1", c(1))],
    ),
    (
        "chunk-unopened",
        at(execution=ex(1, buffer=(c(1),))),
        RuntimeChunk(c(2)),
        at(execution=ex(1, buffer=(c(1), c(2)))),
        [],
    ),
    (
        "chunk-fills-buffer",
        at(execution=ex(1, buffer=(c(1), c(2)))),
        RuntimeChunk(c(3)),
        at(execution=ex(1, buffer=(c(1), c(2), c(3)))),
        [],
    ),
    (
        "chunk-latched",
        at(execution=ex(1, terminal=("success", None))),
        RuntimeChunk(c(1)),
        at(execution=ex(1, terminal=("success", None))),
        [DropBuffer((c(1),), "no live turn")],
    ),
    (
        "chunk-closed",
        at(execution=ex(1, phase="awaiting-persistence")),
        RuntimeChunk(c(1)),
        at(execution=ex(1, phase="awaiting-persistence")),
        [DropBuffer((c(1),), "no live turn")],
    ),
    ("chunk-idle", LIVE, RuntimeChunk(c(1)), LIVE, [DropBuffer((c(1),), "no live turn")]),
    (
        "chunk-roll",
        at(execution=roll(buffer=(c(1),))),
        RuntimeChunk(c(2)),
        at(execution=roll(buffer=(c(1), c(2)))),
        [],
    ),
    (
        "chunk-roll-latched",
        at(execution=roll(terminal=("success", None))),
        RuntimeChunk(c(1)),
        at(execution=roll(terminal=("success", None))),
        [DropBuffer((c(1),), "no live turn")],
    ),
    (
        "overflow",
        at(execution=ex(1, buffer=(c(1), c(2), c(3)), folded=(fu(5),)), queue=(fu(4),)),
        RuntimeChunk(c(4)),
        # the turn ends visibly: error latched, connection closed, its steers go back
        at(
            execution=ex(1, buffer=(c(1), c(2), c(3)), terminal=("error", OVERFLOW)),
            queue=(fu(4), fu(5)),
            connection="disconnected",
        ),
        [DropBuffer((c(4),), "buffer overflow"), CloseConnection("buffer overflow")],
    ),
    (
        "overflow-roll",
        at(execution=roll(buffer=(c(1), c(2), c(3)), folded=(fu(3),)), queue=(fu(4),)),
        RuntimeChunk(c(4)),
        at(
            execution=roll(buffer=(c(1), c(2), c(3)), terminal=("error", OVERFLOW)),
            queue=(fu(3), fu(4)),
            connection="disconnected",
        ),
        [DropBuffer((c(4),), "buffer overflow"), CloseConnection("buffer overflow")],
    ),
    # runtime terminals: close an open stream, or latch; unanswered steers go back at once
    (
        "terminal-open",
        at(execution=replace(OPEN, folded=(fu(2),)), queue=(fu(4),)),
        RuntimeTerminal("error", E),
        at(
            execution=replace(OPEN, phase="awaiting-persistence", terminal=("error", E)),
            queue=(fu(2), fu(4)),
        ),
        [CloseStream("t1", "error", E)],
    ),
    (
        "terminal-open-plain",
        at(execution=OPEN),
        RuntimeTerminal("success"),
        at(execution=replace(OPEN, phase="awaiting-persistence", terminal=("success", None))),
        [CloseStream("t1", "success", None)],
    ),
    (
        "terminal-unopened",
        at(execution=ex(1, buffer=(c(1),), folded=(fu(5),)), queue=(fu(4),)),
        RuntimeTerminal("paused"),
        at(execution=ex(1, buffer=(c(1),), terminal=("paused", None)), queue=(fu(4), fu(5))),
        [],
    ),
    (
        "terminal-unopened-plain",
        at(execution=ex(1, buffer=(c(1),))),
        RuntimeTerminal("error", E),
        at(execution=ex(1, buffer=(c(1),), terminal=("error", E))),
        [],
    ),
    (
        "terminal-roll",
        at(execution=roll(folded=(fu(3),)), queue=(fu(4),)),
        RuntimeTerminal("error", E),
        at(execution=roll(terminal=("error", E)), queue=(fu(3), fu(4))),
        [],
    ),
    (
        "terminal-roll-plain",
        at(execution=roll(buffer=(c(1),))),
        RuntimeTerminal("success"),
        at(execution=roll(buffer=(c(1),), terminal=("success", None))),
        [],
    ),
    # persistence confirms: the execution is idle again and the queue may launch
    (
        "confirmed",
        at(execution=replace(OPEN, phase="awaiting-persistence", folded=(fu(5),)), queue=(fu(4),)),
        TurnTerminal("t1", "paused"),
        at(
            queue=(fu(4), fu(5)),
            last_terminal="paused",
            launch="scheduled",
            launch_target="queued-turn",
        ),
        [SCHEDULE],
    ),
    (
        "confirmed-unopened",
        at(execution=ex(1, buffer=(c(1),))),
        TurnTerminal("t1", "error"),
        at(last_terminal="error"),
        [DropBuffer((c(1),), "turn ended before its stream opened")],
    ),
    (
        "confirmed-compacting",
        at(execution=OPEN, queue=(fu(4),), compacting=True),
        TurnTerminal("t1", "success"),
        at(queue=(fu(4),), compacting=True, last_terminal="success"),
        [],
    ),
    (
        "source-settled",
        at(execution=roll(buffer=(c(1),)), queue=(fu(4),)),
        TurnTerminal("t1", "success"),
        at(
            execution=roll(buffer=(c(1),), source_settled=True),
            queue=(fu(4),),
            last_terminal="success",
            launch="scheduled",
            launch_target="steer-continuation",
        ),
        [ScheduleLaunch("steer-continuation")],
    ),
    (
        "roll-abandoned",
        at(execution=roll(folded=(fu(3),), buffer=(c(1),)), queue=(fu(4),)),
        TurnTerminal("t1", "paused"),
        at(queue=(fu(4),), last_terminal="paused", launch="scheduled", launch_target="queued-turn"),
        [
            DropBuffer((c(1),), "roll abandoned"),
            DropQueued((fu(2), fu(3)), "roll abandoned"),
            SCHEDULE,
        ],
    ),
    (
        "roll-abandoned-plain",
        at(execution=roll()),
        TurnTerminal("t1", "error"),
        at(last_terminal="error"),
        [DropQueued((fu(2),), "roll abandoned")],
    ),
    # follow-ups: queued (launched when nothing runs) or folded into the live turn
    (
        "queue-idle",
        LIVE,
        QueueFollowUp(fu(2)),
        at(queue=(fu(2),), launch="scheduled", launch_target="queued-turn"),
        [SCHEDULE],
    ),
    (
        "queue-busy",
        at(execution=OPEN),
        QueueFollowUp(fu(2)),
        at(execution=OPEN, queue=(fu(2),)),
        [],
    ),
    (
        "queue-roll",
        at(execution=roll()),
        QueueFollowUp(fu(3)),
        at(execution=roll(), queue=(fu(3),)),
        [],
    ),
    (
        "queue-compacting",
        at(compacting=True),
        QueueFollowUp(fu(2)),
        at(compacting=True, queue=(fu(2),)),
        [],
    ),
    (
        "queue-launching",
        QUEUED_RUNNING,
        QueueFollowUp(fu(4)),
        replace(QUEUED_RUNNING, queue=(fu(2), fu(3), fu(4))),
        [],
    ),
    (
        "redirect",
        at(execution=replace(OPEN, folded=(fu(2),))),
        RedirectAccepted("t1", fu(3)),
        at(execution=replace(OPEN, folded=(fu(2), fu(3)))),
        [],
    ),
    (
        "redirect-ended",
        at(execution=replace(OPEN, terminal=("success", None))),
        RedirectAccepted("t1", fu(3)),
        at(execution=replace(OPEN, terminal=("success", None)), queue=(fu(3),)),
        [],
    ),
    (
        "redirect-roll",
        at(execution=roll(folded=(fu(3),))),
        RedirectAccepted("t1", fu(4)),
        at(execution=roll(folded=(fu(3), fu(4)))),
        [],
    ),
    (
        "redirect-other-turn",
        at(execution=OPEN),
        RedirectAccepted("t9", fu(3)),
        at(execution=OPEN, queue=(fu(3),)),
        [],
    ),
    (
        "redirect-other-roll",
        at(execution=roll()),
        RedirectAccepted("t9", fu(3)),
        at(execution=roll(), queue=(fu(3),)),
        [],
    ),
    (
        "redirect-gone",
        LIVE,
        RedirectAccepted("t1", fu(3)),
        at(queue=(fu(3),), launch="scheduled", launch_target="queued-turn"),
        [SCHEDULE],
    ),
    # the steer boundary: A1a closes as a success, the roll takes the steers named
    (
        "boundary",
        at(execution=replace(OPEN, folded=(fu(2), fu(3), fu(4)), buffer=())),
        SteerBoundaryReached(("u3", "u2")),
        at(execution=Transition(source=turn(1), inputs=(fu(2), fu(3)), folded=(fu(4),))),
        [CloseStream("t1", "success")],
    ),
    (
        "boundary-headless",
        at(
            execution=TurnExec(
                turn=turn(1, headless=True), phase="open", folded=(fu(2, headless=True), fu(3))
            )
        ),
        SteerBoundaryReached(("u2",)),
        at(
            execution=Transition(
                source=turn(1, headless=True),
                inputs=(fu(2, headless=True),),
                headless=True,
                folded=(fu(3),),
            )
        ),
        [CloseStream("t1", "success")],
    ),
    (
        "boundary-headless-mixed",
        at(
            execution=TurnExec(
                turn=turn(1, headless=True), phase="open", folded=(fu(2, headless=True), fu(3))
            )
        ),
        SteerBoundaryReached(("u2", "u3")),
        at(
            execution=Transition(
                source=turn(1, headless=True), inputs=(fu(2, headless=True), fu(3)), headless=False
            )
        ),
        [CloseStream("t1", "success")],
    ),
    (
        "boundary-user-turn",
        at(execution=replace(OPEN, folded=(fu(2, headless=True),))),
        SteerBoundaryReached(("u2",)),
        at(execution=Transition(source=turn(1), inputs=(fu(2, headless=True),), headless=False)),
        [CloseStream("t1", "success")],
    ),
    # steers the runtime never delivered regain their place in the queue
    (
        "undelivered-late",
        at(execution=replace(OPEN, folded=(fu(2), fu(5))), queue=(fu(4),)),
        SteerUndeliveredInputs(("u5",)),
        at(execution=replace(OPEN, folded=(fu(2),)), queue=(fu(4), fu(5))),
        [],
    ),
    (
        "undelivered-early",
        at(execution=replace(OPEN, folded=(fu(2), fu(5))), queue=(fu(4),)),
        SteerUndeliveredInputs(("u2",)),
        at(execution=replace(OPEN, folded=(fu(5),)), queue=(fu(2), fu(4))),
        [],
    ),
    (
        "undelivered-roll",
        at(execution=roll(folded=(fu(3), fu(5))), queue=(fu(4),)),
        SteerUndeliveredInputs(("u3", "u5")),
        at(execution=roll(), queue=(fu(3), fu(4), fu(5))),
        [],
    ),
    # launches
    (
        "started",
        at(launch="scheduled", launch_target="runtime-turn", execution=TurnExec(turn=RUNTIME)),
        LaunchStarted("runtime-turn"),
        at(launch="running", launch_target="runtime-turn", execution=TurnExec(turn=RUNTIME)),
        [],
    ),
    (
        "abandoned-next",
        QUEUED_RUNNING,
        LaunchAbandoned("queued-turn"),
        at(queue=(fu(2), fu(3)), launch="scheduled", launch_target="queued-turn"),
        [SCHEDULE],
    ),
    (
        "abandoned",
        at(launch="running", launch_target="runtime-turn"),
        LaunchAbandoned("runtime-turn"),
        LIVE,
        [],
    ),
    (
        "failed-runtime",
        RUNTIME_LAUNCH,
        LaunchFailed("runtime-turn", False, E),
        # the runtime's turn is gone with its buffer; the queue launches next
        at(queue=(fu(2),), launch="scheduled", launch_target="queued-turn", last_terminal="error"),
        [TerminateHeld(E), DropBuffer((c(1),), "runtime turn failed to launch"), SCHEDULE],
    ),
    (
        "failed-runtime-plain",
        at(execution=TurnExec(turn=RUNTIME), launch="running", launch_target="runtime-turn"),
        LaunchFailed("runtime-turn", True, E),
        at(last_terminal="error"),
        [TerminateHeld(E)],
    ),
    (
        "failed-continuation",
        CONTINUING,
        LaunchFailed("steer-continuation", False, E),
        # the roll is over: its steers and the queue behind them are dropped
        at(last_terminal="error"),
        [
            TerminateHeld(E),
            DropBuffer((c(1),), "continuation failed to launch"),
            DropQueued((fu(2), fu(3), fu(4)), "continuation failed to launch"),
        ],
    ),
    (
        "failed-continuation-plain",
        at(
            execution=roll(source_settled=True),
            launch="running",
            launch_target="steer-continuation",
        ),
        LaunchFailed("steer-continuation", False, E),
        at(last_terminal="error"),
        [TerminateHeld(E), DropQueued((fu(2),), "continuation failed to launch")],
    ),
    (
        "failed-continuation-gone",
        at(launch="running", launch_target="steer-continuation"),
        LaunchFailed("steer-continuation", True, E),
        at(last_terminal="error"),
        [TerminateHeld(E)],
    ),
    (
        "failed-queued",
        QUEUED_RUNNING,
        LaunchFailed("queued-turn", False, E),
        at(queue=(fu(3),), launch="scheduled", launch_target="queued-turn", last_terminal="error"),
        [TerminateHeld(E), DropQueued((fu(2),), "launch failed"), SCHEDULE],
    ),
    (
        "failed-queued-all",
        QUEUED_RUNNING,
        LaunchFailed("queued-turn", True, E),
        at(last_terminal="error"),
        [TerminateHeld(E), DropQueued((fu(2), fu(3)), "launch failed")],
    ),
    (
        "failed-queued-empty",
        at(launch="running", launch_target="queued-turn"),
        LaunchFailed("queued-turn", False, E),
        at(last_terminal="error"),
        [TerminateHeld(E)],
    ),
    (
        "failed-queued-empty-all",
        at(launch="running", launch_target="queued-turn"),
        LaunchFailed("queued-turn", True, E),
        at(last_terminal="error"),
        [TerminateHeld(E)],
    ),
    # compaction holds launches; its anchor is routed like any chunk
    ("compaction", LIVE, CompactionStarted(), at(compacting=True), []),
    (
        "compacted",
        at(compacting=True, queue=(fu(2),)),
        CompactionEnded(),
        at(queue=(fu(2),), launch="scheduled", launch_target="queued-turn"),
        [SCHEDULE],
    ),
    (
        "compacted-anchor",
        at(compacting=True, execution=OPEN),
        CompactionEnded(c(1)),
        at(execution=OPEN),
        [Forward("t1", c(1))],
    ),
    (
        "compacted-anchor-buffered",
        at(compacting=True, execution=ex(1)),
        CompactionEnded(c(1)),
        at(execution=ex(1, buffer=(c(1),))),
        [],
    ),
    (
        "compacted-anchor-idle",
        at(compacting=True, queue=(fu(2),)),
        CompactionEnded(c(1)),
        at(queue=(fu(2),), launch="scheduled", launch_target="queued-turn"),
        [DropBuffer((c(1),), "no live turn"), SCHEDULE],
    ),
    # idle expiry and the connection
    (
        "idle",
        LIVE,
        IdleExpired(),
        at(connection="disconnected"),
        [CloseConnection("idle"), SessionOnIdle()],
    ),
    (
        "idle-connecting",
        at(connection="connecting"),
        IdleExpired(),
        at(connection="disconnected"),
        [CloseConnection("idle"), SessionOnIdle()],
    ),
    (
        "connect",
        at(connection="disconnected"),
        ConnectionStarted(8),
        at(connection="connecting", attempt=8),
        [],
    ),
    ("connected", at(connection="connecting"), ConnectionOpened(7), LIVE, []),
    ("lost", LIVE, ConnectionLost(7), at(connection="disconnected"), []),
    ("lost-stale", LIVE, ConnectionLost(6), LIVE, []),
    (
        "lost-connecting",
        at(connection="connecting"),
        ConnectionLost(7),
        at(connection="disconnected"),
        [],
    ),
    (
        "lost-closed",
        at(connection="disconnected"),
        ConnectionLost(7),
        at(connection="disconnected"),
        [],
    ),
]


@pytest.mark.parametrize(
    ("state", "event", "expected", "effects"),
    [pytest.param(s, e, x, f, id=i) for i, s, e, x, f in ACCEPTED],
)
def test_an_event_moves_the_session_to_the_expected_state_with_the_expected_effects(
    state: SessionState, event: Event, expected: SessionState, effects: list[Effect]
) -> None:
    check(state, event, expected, effects)


# --- a stop: the connection closes; the queue and folded steers are dropped or kept ---------

STOP = CloseConnection("stop")
UNSAVED = TurnExec(turn=RUNTIME, admission="admitted", buffer=(c(1),))

STOPS: list[tuple[str, SessionState, bool, SessionState, list[Effect]]] = [
    ("idle", LIVE, False, at(connection="disconnected"), [STOP]),
    (
        "queue-dropped",
        at(queue=(fu(2), fu(3)), launch="scheduled", launch_target="queued-turn"),
        False,
        at(connection="disconnected"),
        [STOP, DropQueued((fu(2), fu(3)), "stopped")],
    ),
    (
        "queue-kept",
        at(queue=(fu(2), fu(3)), launch="scheduled", launch_target="queued-turn"),
        True,
        at(
            queue=(fu(2), fu(3)),
            launch="scheduled",
            launch_target="queued-turn",
            connection="disconnected",
        ),
        [STOP],
    ),
    (
        "queue-kept-launches",
        at(queue=(fu(2),)),
        True,
        at(
            queue=(fu(2),),
            launch="scheduled",
            launch_target="queued-turn",
            connection="disconnected",
        ),
        [STOP, SCHEDULE],
    ),
    (
        "running-launch-finds-nothing",  # the running launch abandons by itself
        QUEUED_RUNNING,
        False,
        at(launch="running", launch_target="queued-turn", connection="disconnected"),
        [STOP, DropQueued((fu(2), fu(3)), "stopped")],
    ),
    (
        "runtime-unsaved",
        at(execution=UNSAVED, queue=(fu(2),), launch="scheduled", launch_target="runtime-turn"),
        True,
        # nothing was streamed: the runtime's turn ends here; the kept queue launches
        at(
            queue=(fu(2),),
            launch="scheduled",
            launch_target="queued-turn",
            connection="disconnected",
        ),
        [STOP, DropBuffer((c(1),), "stopped"), SCHEDULE],
    ),
    (
        "runtime-unsaved-running",
        at(execution=UNSAVED, queue=(fu(2),), launch="running", launch_target="runtime-turn"),
        False,
        at(launch="running", launch_target="runtime-turn", connection="disconnected"),
        [STOP, DropQueued((fu(2),), "stopped"), DropBuffer((c(1),), "stopped")],
    ),
    (
        "runtime-unsaved-empty",
        at(execution=TurnExec(turn=RUNTIME), launch="scheduled", launch_target="runtime-turn"),
        False,
        at(connection="disconnected"),
        [STOP],
    ),
    (
        "runtime-launch-without-turn",
        at(launch="running", launch_target="runtime-turn", queue=(fu(2),)),
        True,
        at(
            launch="running",
            launch_target="runtime-turn",
            queue=(fu(2),),
            connection="disconnected",
        ),
        [STOP],
    ),
    (
        "turn-kept",
        at(execution=replace(OPEN, folded=(fu(5),)), queue=(fu(4),)),
        True,
        # the turn's stream ends paused; its steers go back, in submission order
        at(
            execution=replace(OPEN, phase="awaiting-persistence", terminal=("paused", None)),
            queue=(fu(4), fu(5)),
            connection="disconnected",
        ),
        [STOP],
    ),
    (
        "turn-kept-first",
        at(execution=replace(OPEN, folded=(fu(2),)), queue=(fu(4),)),
        True,
        at(
            execution=replace(OPEN, phase="awaiting-persistence", terminal=("paused", None)),
            queue=(fu(2), fu(4)),
            connection="disconnected",
        ),
        [STOP],
    ),
    (
        "turn-dropped",
        at(execution=replace(OPEN, folded=(fu(5),)), queue=(fu(4),)),
        False,
        at(
            execution=replace(OPEN, phase="awaiting-persistence", terminal=("paused", None)),
            connection="disconnected",
        ),
        [STOP, DropQueued((fu(4),), "stopped"), DropQueued((fu(5),), "stopped")],
    ),
    (
        "turn-ended",
        at(execution=replace(OPEN, terminal=("error", E))),
        False,
        at(
            execution=replace(OPEN, phase="awaiting-persistence", terminal=("error", E)),
            connection="disconnected",
        ),
        [STOP],
    ),
    (
        "turn-unopened",
        at(execution=ex(1, buffer=(c(1),)), launch="running", launch_target="queued-turn"),
        True,
        at(
            execution=ex(
                1, buffer=(c(1),), phase="awaiting-persistence", terminal=("paused", None)
            ),
            launch="running",
            launch_target="queued-turn",
            connection="disconnected",
        ),
        [STOP],
    ),
    (
        "roll-kept",
        at(execution=roll(folded=(fu(5),), buffer=(c(1),)), queue=(fu(4),)),
        True,
        at(
            execution=roll(buffer=(c(1),), terminal=("paused", None)),
            queue=(fu(4), fu(5)),
            connection="disconnected",
        ),
        [STOP],
    ),
    (
        "roll-kept-first",
        at(execution=roll(folded=(fu(3),)), queue=(fu(4),)),
        True,
        at(
            execution=roll(terminal=("paused", None)),
            queue=(fu(3), fu(4)),
            connection="disconnected",
        ),
        [STOP],
    ),
    (
        "waiting-runtime-turns",
        at(execution=CLOSING, waiting=(W5_ENDED, W6, replace(W6, buffer=(c(2), c(3))))),
        False,
        # runtime turns not begun yet end with the runtime: their buffers are dropped visibly
        at(execution=CLOSING, connection="disconnected"),
        [STOP, DropBuffer((c(1),), "stopped"), DropBuffer((c(2), c(3)), "stopped")],
    ),
    (
        "roll-plain",
        at(execution=roll()),
        False,
        at(execution=roll(terminal=("paused", None)), connection="disconnected"),
        [STOP],
    ),
    (
        "roll-ended",
        at(execution=roll(terminal=("error", E), folded=(fu(3),)), queue=(fu(4),)),
        False,
        # A2's end is already latched: only the queue goes
        at(execution=roll(terminal=("error", E), folded=(fu(3),)), connection="disconnected"),
        [STOP, DropQueued((fu(4),), "stopped")],
    ),
]


@pytest.mark.parametrize(
    ("state", "keep_queue", "expected", "effects"),
    [pytest.param(s, k, x, f, id=i) for i, s, k, x, f in STOPS],
)
def test_a_stop_ends_the_turn_paused_and_drops_or_keeps_what_waits(
    state: SessionState, keep_queue: bool, expected: SessionState, effects: list[Effect]
) -> None:
    check(state, Stopped(keep_queue=keep_queue), expected, effects)
