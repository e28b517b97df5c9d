"""``ScheduleRunner``: the one task that fires due schedules (``docs/lifecycles/tasks.md``).

Loop: read the schedules due at ``now`` -> for each, decide (``plan.plan_fire``) and claim the
occurrence with a conditional UPDATE (``ScheduleStore.claim``); only the claimer acts: it starts
the run (``start``) or records the missed occurrence as ``skipped`` -> sleep on the injected
clock until the earliest next occurrence, at most ``poll_interval`` (schedules written by other
processes are seen by then), or until ``wake()`` (a schedule of this process changed).

A schedule whose stored trigger no longer parses is disabled with a warning rather than retried
in a loop. The runner never runs a task itself: ``start`` hands the run to its owner (the
``TaskService`` task group), so a slow run never delays other fires.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import anyio
import anyio.abc

from drupe.errors import DrupeError, ValidationError
from drupe.persistence.schedule_records import ScheduleRecord
from drupe.persistence.schedules import ScheduleStore
from drupe.tasks.clock import Clock
from drupe.tasks.plan import DEFAULT_GRACE, FirePlan, MissedPolicy, plan_fire
from drupe.tasks.triggers import parse_trigger

__all__ = ["MISSED_RESULT", "ScheduleRunner"]

log = logging.getLogger(__name__)

MISSED_RESULT = "Skipped (missed while down)"
StartRun = Callable[[ScheduleRecord, FirePlan], Awaitable[None]]


class ScheduleRunner:
    def __init__(
        self,
        store: ScheduleStore,
        *,
        clock: Clock,
        start: StartRun,
        grace: timedelta = DEFAULT_GRACE,
        poll_interval: timedelta = timedelta(seconds=30),
    ) -> None:
        self.store = store
        self.clock = clock
        self.start = start
        self.grace = grace
        self.poll_interval = poll_interval
        self._wake = anyio.Event()
        self._changed = anyio.Event()
        self.fires = 0
        """Occurrences this runner claimed (fired or recorded as missed)."""
        self.ticks = 0
        """Completed passes over the due schedules."""
        self.napping_until: datetime | None = None
        """While asleep: until when."""
        self.stopping = False
        self.stopped = anyio.Event()

    def wake(self) -> None:
        """Re-read the schedules now (one was created, changed, paused or resumed)."""
        self._wake.set()

    def stop(self) -> None:
        """Make ``run`` return at its next sleep (never in the middle of a database call)."""
        self.stopping = True
        self._wake.set()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Fire schedules until ``stop()`` (or cancelled)."""
        task_status.started()
        try:
            await self._loop()
        finally:
            self.stopped.set()

    async def _loop(self) -> None:
        while not self.stopping:
            self._wake = anyio.Event()
            try:
                until = await self.tick()
            except Exception:  # isolation boundary: a failed pass never stops the runner
                log.exception("schedule runner: a pass failed; retrying after the poll interval")
                until = self.clock.now() + self.poll_interval
            self.ticks += 1
            if until > self.clock.now() and not self.stopping:
                self.napping_until = until
                self._notify()
                try:
                    await self._nap(until)
                finally:
                    self.napping_until = None
            self._notify()

    async def wait_napping(self) -> datetime:
        """Return once the runner sleeps; the time it sleeps until (for tests and probes)."""
        while self.napping_until is None:
            await self._changed.wait()
        return self.napping_until

    async def wait_ticks(self, count: int) -> None:
        """Return once ``count`` passes completed."""
        while self.ticks < count:
            await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def tick(self) -> datetime:
        """Fire what is due now; return when to look again."""
        now = self.clock.now()
        for schedule in await self.store.due(now):
            try:
                await self._fire(schedule, now)
            except DrupeError:
                log.exception("schedule %r: fire failed", schedule.id)
        upcoming = await self.store.next_wakeup()
        limit = now + self.poll_interval
        return limit if upcoming is None else min(upcoming, limit)

    async def _fire(self, schedule: ScheduleRecord, now: datetime) -> None:
        assert schedule.next_run_at is not None
        try:
            trigger = parse_trigger(schedule.trigger, anchor=schedule.created_at)
        except ValidationError as err:
            log.warning("schedule %r disabled: its trigger is invalid (%s)", schedule.id, err)
            await self.store.update(schedule.id, enabled=False)
            return
        policy: MissedPolicy = "run-once" if schedule.missed_policy == "run-once" else "skip"
        plan = plan_fire(trigger, schedule.next_run_at, now, policy, self.grace)
        claimed = await self.store.claim(
            schedule.id, expected=schedule.next_run_at, next_run_at=plan.next_run_at, now=now
        )
        if not claimed:
            return  # another process (or a concurrent edit) took this occurrence
        self.fires += 1
        if plan.fire:
            await self.start(schedule, plan)
            return
        run = await self.store.start_run(
            kind="heartbeat" if schedule.kind == "heartbeat" else "scheduled",
            started_at=now,
            schedule_id=schedule.id,
            agent_id=schedule.agent_id,
            scheduled_for=plan.scheduled_for,
        )
        await self.store.finish_run(run.id, status="skipped", finished_at=now, result=MISSED_RESULT)

    async def _nap(self, until: datetime) -> None:
        wake = self._wake
        async with anyio.create_task_group() as tg:

            async def sleeper() -> None:
                await self.clock.sleep_until(until)
                tg.cancel_scope.cancel()

            async def waker() -> None:
                await wake.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(sleeper)
            tg.start_soon(waker)
