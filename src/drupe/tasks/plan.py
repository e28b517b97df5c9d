"""What to do with a due schedule: the firing decision. Pure (no clock, no I/O).

``plan_fire(trigger, due, now, policy, grace)`` takes the occurrence the schedule row says is next
(``due``, at or before ``now``) and returns a ``FirePlan``:

* on time (``now - due <= grace`` and the following occurrence is still in the future): fire the
  occurrence ``due``; the next run is the occurrence after it;
* missed (the process was down or asleep past ``grace``, or several occurrences elapsed):
  ``skip`` fires nothing and records the miss; ``run-once`` fires ONE run now, for the newest
  missed occurrence; either way the next run is the first occurrence after ``now``, so elapsed
  occurrences are never made up one by one and a restart never fires an occurrence twice.

The caller then claims the plan with a conditional UPDATE (``next_run_at`` must still equal
``due``), so only one process acts on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from drupe.tasks.triggers import Trigger, next_after

__all__ = ["DEFAULT_GRACE", "FirePlan", "MissedPolicy", "plan_fire"]

MissedPolicy = Literal["skip", "run-once"]
DEFAULT_GRACE = timedelta(seconds=60)
"""How late a fire may start and still count as on time."""
_MAX_STEPS = 1000


@dataclass(frozen=True, slots=True)
class FirePlan:
    fire: bool
    """Start a run now."""
    scheduled_for: datetime
    """The occurrence this plan acts on (the run row's ``scheduled_for``)."""
    next_run_at: datetime | None
    """The schedule's next occurrence after the claim (None: no more)."""
    missed: bool
    """Occurrences were missed (the plan follows the missed-run policy)."""


def plan_fire(
    trigger: Trigger,
    due: datetime,
    now: datetime,
    policy: MissedPolicy,
    grace: timedelta = DEFAULT_GRACE,
) -> FirePlan:
    """Decide a due schedule's fire (``due <= now``)."""
    following = next_after(trigger, due)
    on_time = now - due <= grace and (following is None or following > now)
    if on_time:
        return FirePlan(fire=True, scheduled_for=due, next_run_at=following, missed=False)
    newest = due
    for _ in range(_MAX_STEPS):  # bounded: a minutely cron after a month down is 43,200 steps
        if following is None or following > now:
            break
        newest, following = following, next_after(trigger, following)
    return FirePlan(
        fire=policy == "run-once",
        scheduled_for=newest,
        next_run_at=next_after(trigger, now),
        missed=True,
    )
