"""``TaskService``: schedules, run now, heartbeats and background runs, with their owned tasks.

It owns one anyio task group: the ``ScheduleRunner`` loop (unless ``run_scheduler=False``) and
every run it starts. Surfaces (REST, CLI through REST) call it; it validates their input (a clear
``ValidationError`` per mistake) before anything is written, and wakes the runner after each
change so the next fire time is honoured at once.

Rules (``docs/lifecycles/tasks.md``):

* create: the agent must exist (``Agent not found: <id>``); a one-shot in the past is refused;
  ``next_run_at`` is the trigger's first occurrence after now;
* pause/resume are idempotent; resume (and a trigger change) recompute ``next_run_at`` from now,
  so a paused schedule never makes up the fires it missed;
* run now starts a ``manual`` run at once and leaves the schedule's next fire alone;
* a background run (``start_background``) gets its session before the call returns and returns
  once its turn was admitted, so its conversation can be watched at once;
* a schedule whose last three finished runs all failed is paused (a skip or a success breaks
  the chain; a cancel does not count), so a broken task stops failing every minute;
* a background chat turn (``start_chat_run``) follows the rules of ``drupe.tasks.chat_run``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Final, Literal

import anyio
import anyio.abc

from drupe.admission.base import Regenerate, Submit
from drupe.admission.principal import LOCAL_ADMIN, Principal
from drupe.errors import NotFoundError, ValidationError
from drupe.ids import session_conversation_id
from drupe.lifetimes import TaskOwner
from drupe.persistence.schedule_records import ScheduleRecord, TaskRunRecord
from drupe.tasks.chat_run import admit_chat_run, follow_chat_run
from drupe.tasks.heartbeat import HEARTBEAT_PROMPT, heartbeat_schedule_name
from drupe.tasks.plan import DEFAULT_GRACE, FirePlan
from drupe.tasks.run import (
    CANCEL_REASON,
    RunControl,
    TaskDeps,
    TaskJob,
    execute_run,
    schedule_job,
    stop_run,
)
from drupe.tasks.runner import ScheduleRunner
from drupe.tasks.triggers import OnceTrigger, next_after, parse_trigger
from drupe.tasks.validation import DEFAULT_TIMEOUT_MINUTES, checked, same_trigger

__all__ = ["DEFAULT_TIMEOUT_MINUTES", "TaskService"]

log = logging.getLogger(__name__)

_START_WAIT_S: Final = 30.0
_STOP_WAIT_S: Final = 10.0
BREAKER_FAILURES: Final = 3
"""A schedule pauses itself after this many failed runs in a row (skips break the chain)."""


class TaskService(TaskOwner):
    def __init__(
        self,
        deps: TaskDeps,
        *,
        run_scheduler: bool = True,
        grace: timedelta = DEFAULT_GRACE,
        poll_interval: timedelta = timedelta(seconds=30),
    ) -> None:
        self.deps = deps
        self.store = deps.db.schedules
        self.runner = ScheduleRunner(
            self.store,
            clock=deps.clock,
            start=self._start_scheduled,
            grace=grace,
            poll_interval=poll_interval,
        )
        self.run_scheduler = run_scheduler
        self.controls: dict[str, RunControl] = {}

    async def _start_tasks(self, group: anyio.abc.TaskGroup) -> None:
        if self.run_scheduler:
            await group.start(self.runner.run)

    async def _before_cancel(self) -> None:
        if self.run_scheduler:
            # The runner stops at its next sleep: a database call is never cut in half.
            self.runner.stop()
            with anyio.move_on_after(_STOP_WAIT_S, shield=True):
                await self.runner.stopped.wait()

    # -- schedules ---------------------------------------------------------------------------

    async def create_schedule(
        self,
        *,
        agent_id: str,
        name: str,
        prompt: str,
        trigger: Mapping[str, Any],
        timeout_minutes: int | None = None,
        session_mode: str = "fresh",
        deliver_to: Sequence[Mapping[str, Any]] = (),
        missed_policy: str = "skip",
        enabled: bool = True,
        kind: Literal["task", "heartbeat"] = "task",
    ) -> ScheduleRecord:
        if await self.deps.db.agents.get_agent(agent_id) is None:
            raise NotFoundError("agent", agent_id, f"Agent not found: {agent_id}")
        values = checked(
            name=name,
            prompt=prompt,
            timeout_minutes=DEFAULT_TIMEOUT_MINUTES if timeout_minutes is None else timeout_minutes,
            session_mode=session_mode,
            missed_policy=missed_policy,
            deliver_to=deliver_to,
        )
        now = self.deps.clock.now()
        parsed = parse_trigger(trigger, anchor=now)
        next_run = next_after(parsed, now)
        if isinstance(parsed, OnceTrigger) and next_run is None:
            raise ValidationError("trigger.at is in the past")
        record = await self.store.create(
            agent_id=agent_id,
            kind=kind,
            trigger=parsed.as_json(),
            enabled=enabled,
            next_run_at=next_run,
            sticky_session_id=None,
            **values,
        )
        self.runner.wake()
        return record

    async def update_schedule(self, schedule_id: str, **changes: Any) -> ScheduleRecord:
        current = await self.get_schedule(schedule_id)
        merged: dict[str, Any] = {
            "name": current.name,
            "prompt": current.prompt,
            "timeout_minutes": current.timeout_minutes,
            "session_mode": current.session_mode,
            "missed_policy": current.missed_policy,
            "deliver_to": current.deliver_to,
        }
        unknown = set(changes) - set(merged) - {"trigger", "enabled"}
        if unknown:
            raise ValidationError(f"unknown schedule fields: {sorted(unknown)}")
        merged.update({k: v for k, v in changes.items() if k in merged and v is not None})
        values: dict[str, Any] = checked(**merged)
        trigger = changes.get("trigger")
        if trigger is not None:
            now = self.deps.clock.now()
            parsed = parse_trigger(trigger, anchor=now)
            if not same_trigger(parsed, parse_trigger(current.trigger, anchor=current.created_at)):
                # A changed trigger starts from now; an identical one keeps its phase.
                values["trigger"] = parsed.as_json()
                values["next_run_at"] = next_after(parsed, now)
        if values.get("session_mode") == "fresh":
            values["sticky_session_id"] = None
        record = await self.store.update(schedule_id, **values)
        if changes.get("enabled") is not None:
            record = await (self.resume if changes["enabled"] else self.pause)(schedule_id)
        self.runner.wake()
        return record

    async def delete_schedule(self, schedule_id: str) -> None:
        await self.store.delete(schedule_id)
        self.runner.wake()

    async def pause(self, schedule_id: str) -> ScheduleRecord:
        current = await self.get_schedule(schedule_id)
        if not current.enabled:
            return current
        record = await self.store.update(schedule_id, enabled=False)
        self.runner.wake()
        return record

    async def resume(self, schedule_id: str) -> ScheduleRecord:
        current = await self.get_schedule(schedule_id)
        if current.enabled:
            return current
        now = self.deps.clock.now()
        next_run = next_after(parse_trigger(current.trigger, anchor=now), now)
        if next_run is None:
            raise ValidationError("this one-shot schedule's time has passed; it cannot resume")
        record = await self.store.update(schedule_id, enabled=True, next_run_at=next_run)
        self.runner.wake()
        return record

    async def run_now(self, schedule_id: str) -> TaskRunRecord:
        schedule = await self.get_schedule(schedule_id)
        return await self._start(schedule, kind="manual", scheduled_for=None)

    async def history(self, schedule_id: str, limit: int = 50) -> list[TaskRunRecord]:
        """The task's runs, newest first; a deleted task's runs are kept and listed."""
        runs = await self.store.list_runs(schedule_id=schedule_id, limit=limit)
        if not runs:
            await self.get_schedule(schedule_id)  # unknown (and never ran): 404
        return runs

    async def set_heartbeat(
        self,
        agent_id: str,
        *,
        enabled: bool,
        interval_minutes: int = 30,
        deliver_to: Sequence[Mapping[str, Any]] = (),
        timeout_minutes: int = DEFAULT_TIMEOUT_MINUTES,
    ) -> ScheduleRecord:
        """Create or update the agent's heartbeat schedule (disabling pauses, never deletes)."""
        if not 1 <= interval_minutes <= 1440:
            raise ValidationError("interval_minutes must be between 1 and 1440")
        trigger = {"kind": "interval", "seconds": interval_minutes * 60}
        existing = next(iter(await self.store.list(agent_id=agent_id, kind="heartbeat")), None)
        if existing is None:
            return await self.create_schedule(
                agent_id=agent_id,
                name=heartbeat_schedule_name(agent_id),
                prompt=HEARTBEAT_PROMPT,
                trigger=trigger,
                timeout_minutes=timeout_minutes,
                deliver_to=deliver_to,
                enabled=enabled,
                kind="heartbeat",
            )
        return await self.update_schedule(
            existing.id,
            trigger=trigger,
            deliver_to=deliver_to,
            timeout_minutes=timeout_minutes,
            enabled=enabled,
        )

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord:
        record = await self.store.get(schedule_id)
        if record is None:
            raise NotFoundError("schedule", schedule_id)
        return record

    # -- runs --------------------------------------------------------------------------------

    async def _start_scheduled(self, schedule: ScheduleRecord, plan: FirePlan) -> None:
        kind = "heartbeat" if schedule.kind == "heartbeat" else "scheduled"
        await self._start(schedule, kind=kind, scheduled_for=plan.scheduled_for)

    async def _start(
        self, schedule: ScheduleRecord, *, kind: str, scheduled_for: datetime | None
    ) -> TaskRunRecord:
        run = await self.store.start_run(
            kind=kind,
            started_at=self.deps.clock.now(),
            schedule_id=schedule.id,
            agent_id=schedule.agent_id,
            scheduled_for=scheduled_for,
        )
        job = schedule_job(schedule, run.id)
        self._spawn(job)
        return run

    def _spawn(self, job: TaskJob) -> RunControl:
        control = RunControl()
        self.controls[job.run_id] = control

        async def run() -> None:
            try:
                record = await execute_run(self.deps, job, control)
                if record.status == "failed" and job.schedule_id is not None:
                    await self._breaker(job.schedule_id)
            except Exception:  # isolation boundary: one run failing never stops the service
                log.exception("task run %r failed", job.run_id)
                with anyio.CancelScope(shield=True):
                    await self.store.finish_run(
                        job.run_id,
                        status="failed",
                        finished_at=self.deps.clock.now(),
                        error="internal error (see the server log)",
                    )
            finally:
                self.controls.pop(job.run_id, None)
                control.started.set()
                control.finished.set()

        self.task_group.start_soon(run, name=f"task run {job.run_id}")
        return control

    async def _breaker(self, schedule_id: str) -> None:
        """Pause a schedule whose last ``BREAKER_FAILURES`` finished runs all failed."""
        outcomes = await self.store.recent_outcomes(schedule_id, BREAKER_FAILURES)
        if len(outcomes) == BREAKER_FAILURES and all(o == "failed" for o in outcomes):
            log.warning(
                "schedule %r paused: its last %d runs failed", schedule_id, BREAKER_FAILURES
            )
            await self.pause(schedule_id)

    async def start_background(
        self,
        agent_id: str,
        prompt: str,
        *,
        session_id: str | None = None,
        timeout_minutes: int = 0,
        owner_id: str | None = None,
    ) -> TaskRunRecord:
        """Start a headless run of ``agent_id`` now, as ``owner_id`` (None: the local admin);
        returns once its turn was admitted."""
        agent = await self.deps.db.agents.get_agent(agent_id)
        if agent is None:
            raise NotFoundError("agent", agent_id, f"Agent not found: {agent_id}")
        values = checked(
            name=f"{agent.name} (background)",
            prompt=prompt,
            timeout_minutes=timeout_minutes,
            session_mode="fresh",
            missed_policy="skip",
            deliver_to=(),
        )
        if session_id is None:
            created = await self.deps.db.agents.create_session(
                agent_id, title=prompt[:80], owner_id=owner_id
            )
            session_id = created.id
        run = await self.store.start_run(  # the session is on the row from its start
            kind="background",
            started_at=self.deps.clock.now(),
            agent_id=agent_id,
            session_id=session_id,
            conversation_id=session_conversation_id(session_id),
        )
        job = TaskJob(
            run_id=run.id,
            name=values["name"],
            agent_id=agent_id,
            prompt=values["prompt"],
            timeout_minutes=values["timeout_minutes"],
            session_id=session_id,
            owner_id=owner_id,
        )
        control = self._spawn(job)
        with anyio.move_on_after(_START_WAIT_S):
            await control.started.wait()
        latest = await self.store.get_run(run.id)
        assert latest is not None
        return latest

    async def start_chat_run(
        self, request: Submit | Regenerate, caller: Principal = LOCAL_ADMIN
    ) -> TaskRunRecord:
        """Admit a chat turn that no connection owns, as ``caller`` (the port asks the access
        policy); its run row follows it to its end (``chat_run``)."""
        record, control = await admit_chat_run(self.deps, self.controls, request, caller)
        self.task_group.start_soon(follow_chat_run, self.deps, self.controls, record.id, control)
        return record

    async def cancel_run(self, run_id: str) -> bool:
        """Cancel a running run (its partial answer is kept); False when it is not running."""
        control = self.controls.get(run_id)
        if control is None:
            if await self.store.get_run(run_id) is None:
                raise NotFoundError("run", run_id)
            return False
        control.cancel_requested = True
        if control.sentinel is not None:
            control.sentinel.cancelled = True
        if control.session_id is not None:
            await stop_run(self.deps, control, CANCEL_REASON)
        elif control.conversation_id is not None:
            await self.deps.conversations.stop(
                control.caller, control.conversation_id, reason=CANCEL_REASON
            )
        return True

    async def wait_started(self, run_id: str) -> TaskRunRecord:
        """The run row once the run's turn was admitted (or the run ended)."""
        control = self.controls.get(run_id)
        if control is not None:
            await control.started.wait()
        return await self.get_run(run_id)

    async def wait_run(self, run_id: str) -> TaskRunRecord:
        """The run row once the run ended (at once when it is not running in this process)."""
        control = self.controls.get(run_id)
        if control is not None:
            await control.finished.wait()
        return await self.get_run(run_id)

    async def get_run(self, run_id: str) -> TaskRunRecord:
        record = await self.store.get_run(run_id)
        if record is None:
            raise NotFoundError("run", run_id)
        return record

    def live_text(self, run_id: str) -> str | None:
        """The answer so far of a running run (None: not running here)."""
        control = self.controls.get(run_id)
        return None if control is None or control.sentinel is None else control.sentinel.text
