"""Hypothesis state machine over the pure conversation-status reducer (reference §2.3).

A model of the executions is kept beside the reducer (what each one is, which approvals it
still parks, whether a chunk was seen); the invariants restate the lifecycle doc and check the
reducer's status against the model's after every step:

* while no stop happened and an execution streams: ``pending`` until the first chunk of a
  streaming execution, then ``streaming`` (a late chunk of a finished execution moves nothing);
* an explicit stop flips the status to ``aborted`` at once;
* once every execution ended: ``error`` if any errored, else ``aborted`` if every one was
  paused or stopped, else ``done``; ``done``/``aborted`` become ``awaiting-approval`` only
  while a finished (``done``) execution still parks an approval (a paused or errored one drops
  its own), and nothing moves the status afterwards.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from drupe.streaming.status import (
    LIVE_STATUSES,
    Abort,
    ApprovalRequested,
    ApprovalResolved,
    ChunkSeen,
    ExecutionTerminal,
    StatusChanged,
    StatusState,
    compute_status,
    initial_state,
    reduce,
    resolve_status,
)

EIDS = ["a", "b", "c"]


class StatusMachine(RuleBasedStateMachine):
    @initialize(n=st.integers(min_value=1, max_value=3))
    def start(self, n: int) -> None:
        self.eids = EIDS[:n]
        self.state: StatusState = initial_state(self.eids)
        self.history = [self.state.status]
        self.terminal: dict[str, str] = {}
        self.stopped: set[str] = set()
        """Executions an explicit stop caught while they streamed."""
        self.parked: dict[str, set[str]] = {eid: set() for eid in self.eids}
        """The model's approvals: requested while streaming, not resolved, not dropped."""
        self.aborted = False
        self.chunk_seen = False

    def _streaming(self, eid: str) -> bool:
        return eid not in self.terminal and eid not in self.stopped

    def _apply(self, event: object) -> None:
        before = self.state
        self.state, effects = reduce(self.state, event)  # type: ignore[arg-type]
        if self.state.status != before.status:
            assert effects == [StatusChanged(before.status, self.state.status)]
            self.history.append(self.state.status)
        else:
            assert not effects

    def _expected_final(self) -> str:
        """The rules of the module docstring, over the model (every execution has ended)."""
        outcomes = [
            "aborted" if self.terminal[eid] == "paused" else self.terminal[eid] for eid in self.eids
        ]
        if "error" in outcomes:
            return "error"
        status = "aborted" if all(o == "aborted" for o in outcomes) else "done"
        if any(self.parked[eid] for eid in self.eids):
            return "awaiting-approval"
        return status

    @rule(i=st.integers(0, 2))
    def chunk(self, i: int) -> None:
        eid = self.eids[i % len(self.eids)]
        was = self.state.status
        self._apply(ChunkSeen(eid))
        if self._streaming(eid):
            if was == "pending":
                assert self.state.status == "streaming"
            self.chunk_seen = True
        else:  # a late chunk of an execution that ended (or was stopped) moves nothing
            assert self.state.status == was

    @rule(i=st.integers(0, 2), tool=st.sampled_from(["t1", "t2"]))
    def approval(self, i: int, tool: str) -> None:
        eid = self.eids[i % len(self.eids)]
        self._apply(ApprovalRequested(eid, tool))
        if self._streaming(eid):
            self.parked[eid].add(tool)

    @rule(i=st.integers(0, 2), tool=st.sampled_from(["t1", "t2"]))
    def resolve(self, i: int, tool: str) -> None:
        eid = self.eids[i % len(self.eids)]
        self._apply(ApprovalResolved(eid, tool))
        if self._streaming(eid):
            self.parked[eid].discard(tool)

    @precondition(lambda self: len(self.terminal) < len(self.eids))
    @rule(i=st.integers(0, 2), outcome=st.sampled_from(["done", "done", "paused", "error"]))
    def terminal_event(self, i: int, outcome: str) -> None:
        pending = [e for e in self.eids if e not in self.terminal]
        eid = pending[i % len(pending)]
        if eid in self.stopped:
            outcome = "paused"  # an aborted loop always classifies as paused
        self.terminal[eid] = outcome
        if outcome != "done":
            self.parked[eid].clear()  # a paused or errored execution drops its approvals
        self._apply(ExecutionTerminal(eid, outcome))  # type: ignore[arg-type]

    @rule()
    def abort(self) -> None:
        was = self.state.status
        self._apply(Abort())
        if was in LIVE_STATUSES:
            self.aborted = True
            self.stopped.update(e for e in self.eids if e not in self.terminal)
            assert self.state.status == "aborted"  # synchronous flip
        else:
            assert self.state.status == was  # a stop after the end changes nothing

    @invariant()
    def status_matches_the_model(self) -> None:
        assert self.state.seen_chunk == self.chunk_seen
        if len(self.terminal) == len(self.eids):
            assert self.state.status == self._expected_final()
        elif not self.aborted:
            assert self.state.status == ("streaming" if self.chunk_seen else "pending")

    @invariant()
    def streaming_only_once(self) -> None:
        assert self.history.count("streaming") <= 1
        assert self.history[0] == "pending"

    @invariant()
    def executions_and_approvals_match_the_model(self) -> None:
        for eid in self.eids:
            if eid in self.terminal:
                expected = {"done": "done", "paused": "aborted", "error": "error"}
                assert self.state.executions[eid] == expected[self.terminal[eid]]
            elif eid in self.stopped:
                assert self.state.executions[eid] == "aborted"
            else:
                assert self.state.executions[eid] == "streaming"
            assert set(self.state.approvals.get(eid, frozenset())) == self.parked[eid]


TestStatusMachine = StatusMachine.TestCase
TestStatusMachine.settings = settings(
    max_examples=int(os.environ.get("DRUPE_MACHINE_EXAMPLES", "150")),
    stateful_step_count=30,
    deadline=None,
)


# --- the rules case by case (the module docstring of drupe.streaming.status, as tables) ------


@pytest.mark.parametrize(
    ("current", "executions", "expected"),
    [
        ("pending", ["streaming"], "pending"),
        ("pending", ["done", "streaming"], "pending"),
        ("streaming", ["error", "streaming"], "streaming"),
        ("aborted", ["aborted", "streaming"], "streaming"),
        ("streaming", ["aborted"], "aborted"),
        ("streaming", ["aborted", "aborted"], "aborted"),
        ("streaming", ["aborted", "error"], "error"),
        ("streaming", ["done", "error"], "error"),
        ("streaming", ["done", "aborted"], "done"),
        ("streaming", ["done"], "done"),
        ("pending", [], "done"),
    ],
)
def test_compute_rule(current: str, executions: list[str], expected: str) -> None:
    by_id = {f"e{i}": status for i, status in enumerate(executions)}
    assert compute_status(current, by_id) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("executions", "parked", "expected"),
    [
        (["done"], {"e0": {"t1"}}, "awaiting-approval"),
        (["aborted"], {"e0": {"t1"}}, "awaiting-approval"),
        (["done", "aborted"], {"e1": {"t1"}}, "awaiting-approval"),
        (["done"], {"e0": set()}, "done"),
        (["aborted"], {}, "aborted"),
        (["done", "error"], {"e0": {"t1"}}, "error"),
        (["done", "streaming"], {"e0": {"t1"}}, "streaming"),
    ],
)
def test_resolve_rule(executions: list[str], parked: dict[str, set[str]], expected: str) -> None:
    by_id = {f"e{i}": status for i, status in enumerate(executions)}
    approvals = {eid: frozenset(tools) for eid, tools in parked.items()}
    assert resolve_status("streaming", by_id, approvals) == expected  # type: ignore[arg-type]


def test_a_stream_starts_pending_with_every_execution_streaming() -> None:
    state = initial_state(["a", "b"])
    assert state == StatusState(
        status="pending", executions={"a": "streaming", "b": "streaming"}, approvals={}
    )
    assert state.seen_chunk is False


def test_a_parked_approval_turns_a_finished_answer_into_awaiting_approval() -> None:
    state = initial_state(["a"])
    for event in (ChunkSeen("a"), ApprovalRequested("a", "t1")):
        state, _ = reduce(state, event)
    state, effects = reduce(state, ExecutionTerminal("a", "done"))
    assert state.status == "awaiting-approval"
    assert effects == [StatusChanged("streaming", "awaiting-approval")]
    # a stop after the end, a late chunk or approval change nothing
    for late in (Abort(), ChunkSeen("a"), ApprovalResolved("a", "t1")):
        assert reduce(state, late) == (state, [])


def test_a_stop_while_an_approval_is_pending_ends_aborted() -> None:
    state = initial_state(["a"])
    for event in (ChunkSeen("a"), ApprovalRequested("a", "t1")):
        state, _ = reduce(state, event)
    state, effects = reduce(state, Abort())
    assert (state.status, effects) == ("aborted", [StatusChanged("streaming", "aborted")])
    state, effects = reduce(state, ExecutionTerminal("a", "paused"))
    assert (state.status, effects) == ("aborted", [])
    assert not any(state.approvals.values())


def test_an_execution_ending_before_any_chunk_leaves_its_sibling_pending() -> None:
    # compute: an execution still streams and no chunk was seen -> stay pending.
    state = initial_state(["a", "b"])
    for outcome in ("done", "error"):
        after, effects = reduce(state, ExecutionTerminal("a", outcome))  # type: ignore[arg-type]
        assert (after.status, effects) == ("pending", [])
        assert after.executions == {"a": outcome, "b": "streaming"}


def test_an_errored_execution_drops_its_approvals_and_ends_the_answer_in_error() -> None:
    state = initial_state(["a", "b"])
    for event in (ChunkSeen("a"), ApprovalRequested("a", "t1"), ApprovalRequested("b", "t2")):
        state, _ = reduce(state, event)
    state, effects = reduce(state, ExecutionTerminal("a", "error"))
    assert (state.status, effects) == ("streaming", [])
    assert state.approvals.get("a", frozenset()) == frozenset()
    assert state.approvals["b"] == frozenset({"t2"})
    state, effects = reduce(state, ExecutionTerminal("b", "done"))
    assert (state.status, effects) == ("error", [StatusChanged("streaming", "error")])


@pytest.mark.parametrize(("first", "final"), [("done", "done"), ("error", "error")])
def test_a_stop_after_one_execution_ended_stops_only_the_others(first: str, final: str) -> None:
    # The stop flips the status at once and catches only the executions still streaming; once
    # every execution ended, compute decides: not every one aborted -> error if any, else done.
    state = initial_state(["a", "b"])
    for event in (ChunkSeen("a"), ExecutionTerminal("a", first)):  # type: ignore[arg-type]
        state, _ = reduce(state, event)
    assert state.status == "streaming"
    state, effects = reduce(state, Abort())
    assert (state.status, effects) == ("aborted", [StatusChanged("streaming", "aborted")])
    assert state.executions == {"a": first, "b": "aborted"}
    state, effects = reduce(state, ExecutionTerminal("b", "paused"))
    assert (state.status, effects) == (final, [StatusChanged("aborted", final)])
