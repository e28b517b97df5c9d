"""The pure takeover decisions (``drupe.cluster.owner_loss``): what is answered again, and how
every unfinished execution of a lost turn's log ends."""

from __future__ import annotations

from dataclasses import dataclass

from drupe.cluster.chunk_log import FEED_MARK, FEED_NAMED
from drupe.cluster.log_encoding import LogEntry
from drupe.cluster.owner_loss import (
    Ending,
    RetryPlan,
    log_endings,
    lost_parent,
    retry_plan,
    row_anchors,
)


@dataclass(frozen=True)
class Row:
    id: str
    role: str
    status: str
    parent_id: str | None
    model_id: str | None
    created_at: int


def rows() -> list[Row]:
    return [
        Row("u1", "user", "success", None, None, 1),
        Row("a1", "assistant", "error", "u1", "m1", 2),  # an earlier, finished answer
        Row("u2", "user", "success", "a1", None, 3),
        Row("b1", "assistant", "pending", "u2", "m1", 4),
        Row("b2", "assistant", "pending", "u2", "m2", 5),  # a fan-out sibling
        Row("b3", "assistant", "success", "u2", "m3", 6),  # finished: not lost
    ]


def test_the_newest_lost_answers_user_message_is_answered_again_with_their_models() -> None:
    assert lost_parent(rows()) == "u2"
    assert retry_plan(rows(), attempts=1, limit=2) == RetryPlan("u2", ("m1", "m2"), ("b1", "b2"))
    assert retry_plan(rows(), attempts=2, limit=2) is not None


def test_past_the_limit_or_with_nothing_lost_nothing_is_answered_again() -> None:
    assert retry_plan(rows(), attempts=3, limit=2) is None
    settled = [r for r in rows() if r.status != "pending"]
    assert lost_parent(settled) is None and retry_plan(settled, attempts=1, limit=2) is None
    # Rows without a parent or a model cannot be answered again.
    odd = [
        Row("x", "assistant", "pending", None, "m", 1),
        Row("y", "assistant", "pending", "u", None, 2),
    ]
    assert retry_plan(odd, attempts=1, limit=2) is None


def test_only_the_newest_user_messages_answers_are_retried() -> None:
    older = [*rows(), Row("c1", "assistant", "pending", "u1", "m9", 0)]
    plan = retry_plan(older, attempts=1, limit=2)
    assert plan is not None and plan.user_message_id == "u2" and "c1" not in plan.row_ids


def test_anchors_leave_out_the_logs_numbering_and_marks() -> None:
    assert row_anchors({"m1": "b1", "#1": "m1", "#2": "text-1"}) == {"m1": "b1"}
    # The feed mark the announcement writes is not an execution's row.
    marks = {FEED_MARK: "1", FEED_NAMED: "p:feed:w1"}
    assert row_anchors({"m1": "b1", **marks, "m2": "b2"}) == {"m1": "b1", "m2": "b2"}


def entries() -> list[LogEntry]:
    return [
        LogEntry("1-0", "m1", ({"type": "start"},), seqs=(1,)),
        LogEntry("2-0", "m2", ({"type": "start"},), seqs=(2,)),
        LogEntry("3-0", "m1", ({"type": "text-delta", "id": "t", "delta": "x"},), seqs=(7,)),
        LogEntry("4-0", "m3", ({"type": "start"},), seqs=(5,)),
        LogEntry("5-0", "m3", terminal="success"),
    ]


def test_every_unfinished_execution_ends_then_the_turn() -> None:
    assert log_endings(entries(), {"m1": "b1", "m2": "b2"}, {}) == [
        Ending("m1"),
        Ending("m2"),
        Ending(""),
    ]


def test_a_retried_execution_points_to_its_new_attempt_with_a_seq_after_the_log() -> None:
    retried = {"b1": ("t2", "m1"), "b2": ("t2", "m2")}
    assert log_endings(entries(), {"m1": "b1", "m2": "b2"}, retried) == [
        Ending("m1", ("t2", "m1"), 8),
        Ending("m2", ("t2", "m2"), 9),
        Ending(""),
    ]
    # Only the executions whose rows are answered again point anywhere.
    assert log_endings(entries(), {"m1": "b1", "m2": "b2"}, {"b2": ("t2", "m2")}) == [
        Ending("m1"),
        Ending("m2", ("t2", "m2"), 8),
        Ending(""),
    ]


def test_a_retried_execution_of_a_log_without_seqs_gets_the_first_seq() -> None:
    seqless = [LogEntry("1-0", "m1", ({"type": "start"},))]
    assert log_endings(seqless, {"m1": "b1"}, {"b1": ("t2", "m1")}) == [
        Ending("m1", ("t2", "m1"), 1),
        Ending(""),
    ]


def test_an_execution_without_an_anchor_is_never_pointed_at_a_new_attempt() -> None:
    # Its row is unknown: even a retried row keyed by an empty id does not match it.
    assert log_endings(entries(), {"m1": "b1"}, {"": ("t9", "x"), "b1": ("t2", "m1")}) == [
        Ending("m1", ("t2", "m1"), 8),
        Ending("m2"),
        Ending(""),
    ]


def test_an_empty_log_still_ends_the_turn() -> None:
    assert log_endings([], {}, {}) == [Ending("")]
