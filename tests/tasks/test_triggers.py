"""Triggers and the firing decision, against hand-computed times (pure; no clock, no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from drupe.errors import ValidationError
from drupe.tasks.plan import plan_fire
from drupe.tasks.triggers import CronTrigger, IntervalTrigger, next_after, parse_trigger

T0 = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)


def test_cron_follows_local_time_across_the_spring_forward() -> None:
    # Europe/Berlin moves from UTC+1 to UTC+2 at 2026-03-29 02:00 local.
    trigger = parse_trigger(
        {"kind": "cron", "expr": "0 9 * * *", "timezone": "Europe/Berlin"}, anchor=T0
    )
    first = next_after(trigger, T0)
    second = next_after(trigger, first) if first else None
    assert first == datetime(2026, 3, 28, 8, 0, tzinfo=UTC)  # 09:00 CET
    assert second == datetime(2026, 3, 29, 7, 0, tzinfo=UTC)  # 09:00 CEST


def test_cron_in_the_skipped_hour_fires_once_right_after_it() -> None:
    trigger = CronTrigger("30 2 * * *", "Europe/Berlin")
    fire = next_after(trigger, datetime(2026, 3, 28, 2, 0, tzinfo=UTC))
    # 02:30 does not exist on 29 March; Debian cron runs it at 03:00 CEST (01:00 UTC).
    assert fire == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    assert next_after(trigger, fire) == datetime(2026, 3, 30, 0, 30, tzinfo=UTC)


def test_cron_in_the_repeated_hour_fires_once() -> None:
    # Autumn: 02:00-03:00 local happens twice on 2026-10-25.
    trigger = CronTrigger("30 2 * * *", "Europe/Berlin")
    fire = next_after(trigger, datetime(2026, 10, 24, 12, 0, tzinfo=UTC))
    assert fire == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # 02:30 CEST, the first one
    assert next_after(trigger, fire) == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)


def test_interval_is_a_grid_without_drift() -> None:
    trigger = IntervalTrigger(3600, T0)
    assert next_after(trigger, T0) == T0 + timedelta(hours=1)
    late = T0 + timedelta(hours=1, minutes=7)
    assert next_after(trigger, late) == T0 + timedelta(hours=2)


def test_once_fires_only_before_its_time() -> None:
    trigger = parse_trigger({"kind": "once", "at": "2026-03-27T16:00:00+02:00"}, anchor=T0)
    at = datetime(2026, 3, 27, 14, 0, tzinfo=UTC)
    assert next_after(trigger, T0) == at
    assert next_after(trigger, at) is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "cron", "expr": "61 * * * *"}, "invalid cron expression"),
        ({"kind": "cron", "expr": "0 9 * * *", "timezone": "Mars/Olympus"}, "unknown time zone"),
        ({"kind": "cron", "expr": "* * */20 * 1L"}, "never fires"),
        ({"kind": "interval", "seconds": 5}, "between 60"),
        ({"kind": "interval", "seconds": "60"}, "integer"),
        ({"kind": "once", "at": "2026-03-27T14:00:00"}, "UTC offset"),
        ({"kind": "weekly"}, "trigger.kind"),
    ],
)
def test_bad_triggers_are_refused_with_a_reason(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        parse_trigger(data, anchor=T0)


def test_an_on_time_fire_fires_its_occurrence() -> None:
    trigger = IntervalTrigger(3600, T0)
    due = T0 + timedelta(hours=1)
    plan = plan_fire(trigger, due, due + timedelta(seconds=5), "skip")
    assert (plan.fire, plan.missed, plan.scheduled_for) == (True, False, due)
    assert plan.next_run_at == T0 + timedelta(hours=2)


@pytest.mark.parametrize(("policy", "fires"), [("skip", False), ("run-once", True)])
def test_missed_occurrences_follow_the_policy_and_are_never_made_up(
    policy: str, fires: bool
) -> None:
    trigger = IntervalTrigger(3600, T0)
    now = T0 + timedelta(hours=3, minutes=30)  # 1h, 2h, 3h were missed
    plan = plan_fire(trigger, T0 + timedelta(hours=1), now, policy)  # type: ignore[arg-type]
    assert plan.missed is True and plan.fire is fires
    assert plan.scheduled_for == T0 + timedelta(hours=3)  # the newest missed occurrence
    assert plan.next_run_at == T0 + timedelta(hours=4)


def test_a_single_late_occurrence_past_the_grace_counts_as_missed() -> None:
    trigger = IntervalTrigger(3600, T0)
    due = T0 + timedelta(hours=1)
    plan = plan_fire(trigger, due, due + timedelta(minutes=5), "skip")
    assert plan.missed is True and plan.fire is False
    assert plan.next_run_at == T0 + timedelta(hours=2)
