"""Hypothesis state machine over the pure conversation-status reducer (reference §2.3).

A model of the executions is kept beside the reducer; the invariants restate the lifecycle doc.
"""

from __future__ import annotations

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
    StatusState,
    initial_state,
    reduce,
)

EIDS = ["a", "b", "c"]


class StatusMachine(RuleBasedStateMachine):
    @initialize(n=st.integers(min_value=1, max_value=3))
    def start(self, n: int) -> None:
        self.eids = EIDS[:n]
        self.state: StatusState = initial_state(self.eids)
        self.history = [self.state.status]
        self.terminal: dict[str, str] = {}
        self.aborted = False
        self.chunk_seen = False

    def _apply(self, event: object) -> None:
        before = self.state
        self.state, effects = reduce(self.state, event)  # type: ignore[arg-type]
        if self.state.status != before.status:
            assert effects and effects[-1].status == self.state.status
            self.history.append(self.state.status)
        else:
            assert not effects

    @rule(i=st.integers(0, 2))
    def chunk(self, i: int) -> None:
        eid = self.eids[i % len(self.eids)]
        was = self.state.status
        self._apply(ChunkSeen(eid))
        if eid not in self.terminal and not self.aborted and was == "pending":
            assert self.state.status == "streaming"
        self.chunk_seen = self.chunk_seen or (eid not in self.terminal and not self.aborted)

    @rule(i=st.integers(0, 2), tool=st.sampled_from(["t1", "t2"]))
    def approval(self, i: int, tool: str) -> None:
        self._apply(ApprovalRequested(self.eids[i % len(self.eids)], tool))

    @rule(i=st.integers(0, 2), tool=st.sampled_from(["t1", "t2"]))
    def resolve(self, i: int, tool: str) -> None:
        self._apply(ApprovalResolved(self.eids[i % len(self.eids)], tool))

    @precondition(lambda self: len(self.terminal) < len(self.eids))
    @rule(i=st.integers(0, 2), outcome=st.sampled_from(["done", "paused", "error"]))
    def terminal_event(self, i: int, outcome: str) -> None:
        pending = [e for e in self.eids if e not in self.terminal]
        eid = pending[i % len(pending)]
        if self.aborted:
            outcome = "paused"  # an aborted loop always classifies as paused
        self.terminal[eid] = outcome
        self._apply(ExecutionTerminal(eid, outcome))  # type: ignore[arg-type]

    @rule()
    def abort(self) -> None:
        was_live = self.state.status in LIVE_STATUSES
        self._apply(Abort())
        if was_live:
            self.aborted = True
            assert self.state.status == "aborted"  # synchronous flip

    @invariant()
    def live_until_every_execution_ended(self) -> None:
        if not self.aborted and len(self.terminal) < len(self.eids):
            assert self.state.status in LIVE_STATUSES

    @invariant()
    def streaming_only_once(self) -> None:
        assert self.history.count("streaming") <= 1
        assert self.history[0] == "pending"

    @invariant()
    def terminal_status_follows_the_rules(self) -> None:
        if self.aborted or len(self.terminal) < len(self.eids):
            return
        outcomes = set(self.terminal.values())
        approvals = any(self.state.approvals.values())
        if outcomes == {"paused"}:
            assert self.state.status in ("aborted", "awaiting-approval")
        elif "error" in outcomes:
            assert self.state.status == "error"
        else:
            assert self.state.status in ("done", "awaiting-approval")
        if self.state.status == "awaiting-approval":
            assert approvals

    @invariant()
    def approvals_only_for_streaming_or_done(self) -> None:
        for eid, tools in self.state.approvals.items():
            if tools:
                assert self.state.executions[eid] in ("streaming", "done", "aborted")


TestStatusMachine = StatusMachine.TestCase
TestStatusMachine.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
