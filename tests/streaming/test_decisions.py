"""The pure decisions of chat steering and approvals, case by case (reference §5 and §8).

The expected values are the rules as the lifecycle doc states them (docs/lifecycles/
turn-and-tools.md), written out as tables; these tests run in milliseconds, so the mutation run
(``scripts/mutation``) uses them beside the state machines.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from drupe.errors import ValidationError
from drupe.streaming.approval_rules import Decision, apply_decisions, pending_approval_ids
from drupe.streaming.steering import after_terminal, on_enqueue


@pytest.mark.parametrize(
    ("status", "decision"),
    [
        ("pending", "queue"),
        ("streaming", "queue"),
        ("awaiting-approval", "queue-and-hold"),
        ("done", "queue-and-start"),
        (None, "queue-and-start"),
        ("aborted", "drop"),
        ("error", "drop"),
    ],
)
def test_a_steer_arriving_in_each_status(status: str | None, decision: str) -> None:
    assert on_enqueue(status) == decision


@pytest.mark.parametrize(
    ("status", "decision"),
    [
        ("done", "chain"),
        ("awaiting-approval", "hold"),
        ("aborted", "drop"),
        ("error", "drop"),
    ],
)
@pytest.mark.parametrize("queued", [1, 2, 5])
def test_the_queue_after_each_terminal(status: str, decision: str, queued: int) -> None:
    assert after_terminal(status, queued) == decision


@pytest.mark.parametrize("status", ["done", "awaiting-approval", "aborted", "error"])
def test_an_empty_queue_needs_nothing_after_any_terminal(status: str) -> None:
    assert after_terminal(status, 0) == "none"


def _requested(call_id: str, approval_id: str, kind: str = "tool-delete") -> dict[str, Any]:
    return {
        "type": kind,
        "toolCallId": call_id,
        "state": "approval-requested",
        "input": {"path": "/tmp"},
        "approval": {"id": approval_id},
    }


PARTS: list[dict[str, Any]] = [
    {"type": "step-start"},
    {"type": "text", "text": "I will clean up."},
    _requested("c1", "ap1"),
    _requested("c2", "ap2", kind="dynamic-tool"),
    {
        "type": "tool-look",
        "toolCallId": "c3",
        "state": "output-available",
        "input": {},
        "output": "3 files",
    },
]


def test_pending_approval_ids_are_the_requested_tool_parts_only() -> None:
    assert pending_approval_ids(PARTS) == frozenset({"ap1", "ap2"})
    # a non-tool part in that state, or one without an approval, is not pending
    odd: list[dict[str, Any]] = [
        {"type": "text", "state": "approval-requested", "approval": {"id": "x"}},
        {"type": 7, "state": "approval-requested", "approval": {"id": "y"}},
        {"type": "tool-a", "state": "approval-requested"},
        {"type": "tool-b", "state": "approval-responded", "approval": {"id": "z"}},
    ]
    assert pending_approval_ids(odd) == frozenset()


def test_approving_marks_the_part_responded_and_keeps_the_rest_pending() -> None:
    before = copy.deepcopy(PARTS)
    result = apply_decisions(PARTS, [Decision(approval_id="ap1", approved=True)])
    assert before == PARTS  # the input is never modified
    assert result.changed is True
    assert result.still_pending == frozenset({"ap2"})
    assert result.parts[2] == {
        "type": "tool-delete",
        "toolCallId": "c1",
        "state": "approval-responded",
        "input": {"path": "/tmp"},
        "approval": {"id": "ap1", "approved": True},
    }
    assert result.parts[:2] == PARTS[:2] and result.parts[3:] == PARTS[3:]


def test_a_denial_keeps_its_reason_and_a_dynamic_tool_is_a_tool() -> None:
    decisions = [
        Decision(approval_id="ap2", approved=False, reason="not today"),
        Decision(approval_id="ap1", approved=False),
    ]
    result = apply_decisions(PARTS, decisions)
    assert result.changed is True
    assert result.still_pending == frozenset()
    assert result.parts[3]["state"] == "approval-responded"
    assert result.parts[3]["approval"] == {"id": "ap2", "approved": False, "reason": "not today"}
    assert result.parts[2]["approval"] == {"id": "ap1", "approved": False}


def test_repeating_a_decision_is_a_no_op() -> None:
    first = apply_decisions(PARTS, [Decision(approval_id="ap1", approved=False)])
    again = apply_decisions(first.parts, [Decision(approval_id="ap1", approved=False)])
    assert again.changed is False
    assert again.parts == first.parts
    assert again.still_pending == frozenset({"ap2"})


@pytest.mark.parametrize(
    ("first", "then", "message"),
    [(True, False, "was already approved"), (False, True, "was already denied")],
)
def test_changing_a_decision_is_refused(first: bool, then: bool, message: str) -> None:
    decided = apply_decisions(PARTS, [Decision(approval_id="ap1", approved=first)]).parts
    with pytest.raises(ValidationError, match=f"approval 'ap1' {message}"):
        apply_decisions(decided, [Decision(approval_id="ap1", approved=then)])


def test_an_unknown_approval_id_is_refused_and_nothing_applies() -> None:
    before = copy.deepcopy(PARTS)
    decisions = [
        Decision(approval_id="ap1", approved=True),
        Decision(approval_id="nope", approved=True),
    ]
    with pytest.raises(ValidationError, match="unknown approval id 'nope'"):
        apply_decisions(PARTS, decisions)
    assert before == PARTS


def test_a_part_without_an_approval_id_cannot_be_decided() -> None:
    parts = [{"type": "tool-x", "state": "approval-requested", "approval": {}}]
    with pytest.raises(ValidationError, match="unknown approval id"):
        apply_decisions(parts, [Decision(approval_id="", approved=True)])
    text = [{"type": "text", "state": "approval-requested", "approval": {"id": "t"}}]
    with pytest.raises(ValidationError, match="unknown approval id 't'"):
        apply_decisions(text, [Decision(approval_id="t", approved=True)])
