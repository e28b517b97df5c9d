"""``execute_run``: one agent-task run, from its run row to its outcome (reference §6.11).

Order:

1. the agent must exist (else ``failed``: ``Agent not found: <id>``); a heartbeat builds its
   prompt from ``heartbeat.md`` or is ``skipped`` with the reason (``drupe.tasks.heartbeat``);
2. the session: the one a background run names; else the schedule's sticky session when it still
   exists and belongs to the agent; else a fresh one (bound to the schedule when sticky). The
   session and conversation ids are written on the run row BEFORE the run starts;
3. under the conversation's admission lock: a busy session (a turn live or queued) is NOT
   touched: the run is ``skipped`` with ``Skipped (session busy)``; otherwise a headless submit
   goes through the dispatcher with the sentinel and one delivery listener per subscribed chat;
4. the run waits for the sentinel to settle, while the task's own timeout (on the injected clock)
   or a cancel may abort it: their delivery listeners are removed first, then the session's
   turn is stopped; the partial answer is persisted ``paused`` by the session's persistence;
5. at settle every listener of the run is detached; the run row gets its status, the first 200
   characters of the result, the error and the duration; a failure is sent to each subscribed
   chat as ``[Task failed] <name> / <duration> / <error>`` (a cancel sends nothing).

A shutdown cancels the wait: the run row is finished ``cancelled`` (shielded) and the manager
persists the partial as usual.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Literal

import anyio

from drupe.admission.base import Submit
from drupe.admission.principal import LOCAL_ADMIN, Principal
from drupe.errors import AdmissionError, DrupeError, ValidationError
from drupe.persistence.agents import session_conversation_id
from drupe.persistence.schedule_records import ScheduleRecord, TaskRunRecord
from drupe.sessions.drivers.base import runs_headless
from drupe.streaming.listeners.base import Listener
from drupe.tasks.delivery import DeliveryPort, DeliveryTarget, failure_text
from drupe.tasks.heartbeat import HeartbeatSkip, heartbeat_prompt
from drupe.tasks.sentinel import TaskSentinel

if TYPE_CHECKING:
    from drupe.admission.conversations import Admitted, Conversations
    from drupe.persistence.db import Database
    from drupe.sessions.drivers.registry import DriverRegistry
    from drupe.sessions.host import AgentSessionHost
    from drupe.tasks.clock import Clock

__all__ = ["BUSY_RESULT", "RunControl", "TaskDeps", "TaskJob", "execute_run", "schedule_job"]

log = logging.getLogger(__name__)

BUSY_RESULT = "Skipped (session busy)"
TIMEOUT_REASON = "task-timeout"
CANCEL_REASON = "task-cancelled"


@dataclass(slots=True, kw_only=True)
class TaskDeps:
    """What a run needs. ``delivery`` may be replaced once the channel layer is up."""

    db: Database
    conversations: Conversations
    host: AgentSessionHost
    drivers: DriverRegistry
    delivery: DeliveryPort
    clock: Clock


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskJob:
    run_id: str
    name: str
    agent_id: str
    prompt: str
    schedule_kind: Literal["task", "heartbeat"] = "task"
    schedule_id: str | None = None
    timeout_minutes: int = 0
    session_mode: Literal["fresh", "sticky"] = "fresh"
    sticky_session_id: str | None = None
    session_id: str | None = None
    """A background run on an existing session."""
    deliver_to: tuple[DeliveryTarget, ...] = ()
    owner_id: str | None = None
    """The user the run acts as (its task's owner); None: the local admin (no identity)."""


def schedule_job(schedule: ScheduleRecord, run_id: str) -> TaskJob:
    """The job of one run of ``schedule`` (its row fields as they are at the fire)."""
    return TaskJob(
        run_id=run_id,
        name=schedule.name,
        agent_id=schedule.agent_id,
        prompt=schedule.prompt,
        schedule_kind="heartbeat" if schedule.kind == "heartbeat" else "task",
        schedule_id=schedule.id,
        timeout_minutes=schedule.timeout_minutes,
        session_mode="sticky" if schedule.session_mode == "sticky" else "fresh",
        sticky_session_id=schedule.sticky_session_id,
        deliver_to=tuple(DeliveryTarget.of(item) for item in schedule.deliver_to),
        owner_id=schedule.owner_id,
    )


@dataclass(slots=True)
class RunControl:
    """The live handle of a run: what a cancel needs, and when the run has started."""

    conversation_id: str | None = None
    session_id: str | None = None
    sentinel: TaskSentinel | None = None
    deliveries: list[Listener] = field(default_factory=list)
    admission: Admitted | None = None
    """The admitted turn: its subscribers are let go through it."""
    started: anyio.Event = field(default_factory=anyio.Event)
    """Set once the run's turn was admitted (or the run ended without one)."""
    finished: anyio.Event = field(default_factory=anyio.Event)
    """Set once the run row holds the outcome."""
    caller: Principal = LOCAL_ADMIN
    """Who the run acts as (its task's owner)."""
    cancel_requested: bool = False


async def execute_run(deps: TaskDeps, job: TaskJob, control: RunControl) -> TaskRunRecord:
    """Run ``job`` (its run row exists, ``running``) and finish its row."""
    try:
        return await _execute(deps, job, control)
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            control.started.set()
            _detach(deps, control)
            await deps.db.schedules.finish_run(
                job.run_id, status="cancelled", finished_at=deps.clock.now(), error="shutdown"
            )
        raise


async def _execute(deps: TaskDeps, job: TaskJob, control: RunControl) -> TaskRunRecord:
    store = deps.db.schedules
    agent = await deps.db.agents.get_agent(job.agent_id)
    try:
        control.caller = await _owner(deps, job)
    except DrupeError as err:
        return await _finish(deps, job, control, "failed", None, str(err))
    if agent is None or not await _may_use(deps, control.caller, agent.id, agent.owner_id):
        return await _finish(deps, job, control, "failed", None, f"Agent not found: {job.agent_id}")
    prompt = job.prompt
    if job.schedule_kind == "heartbeat":
        driver = deps.drivers.get(agent.driver_type) if agent.driver_type in deps.drivers else None
        built = heartbeat_prompt(
            agent.workspace, headless_capable=driver is not None and runs_headless(driver)
        )
        if isinstance(built, HeartbeatSkip):
            return await _finish(deps, job, control, "skipped", built.reason, None)
        prompt = built.prompt
    try:
        session_id = await _session_for(deps, job)
    except DrupeError as err:
        return await _finish(deps, job, control, "failed", None, str(err))
    conversation_id = session_conversation_id(session_id)
    control.session_id, control.conversation_id = session_id, conversation_id
    await store.update_run(job.run_id, session_id=session_id, conversation_id=conversation_id)
    if control.cancel_requested:
        return await _finish(deps, job, control, "cancelled", None, "cancelled")
    sentinel = TaskSentinel(f"agent-task:{job.run_id}")
    deliveries = [
        deps.delivery.listener(target, listener_id=f"task-delivery:{job.run_id}:{index}")
        for index, target in enumerate(job.deliver_to)
    ]
    control.sentinel, control.deliveries = sentinel, deliveries
    sentinel.on_settle = lambda: _detach(deps, control)
    # Skip when busy is the ``reject`` strategy: a session with a turn live or queued (in
    # cluster mode: answering on another node) refuses the submit before anything is written.
    try:
        admission = await deps.conversations.submit(
            control.caller,
            Submit(
                conversation_id=conversation_id,
                parts=[{"type": "text", "text": prompt}],
                metadata={"headless": True, "taskRunId": job.run_id},
                strategy="reject",
            ),
            subscribers=[sentinel, *deliveries],
        )
    except AdmissionError as err:
        if err.reason != "busy":
            return await _finish(deps, job, control, "failed", None, str(err))
        return await _finish(deps, job, control, "skipped", BUSY_RESULT, None)
    except DrupeError as err:
        return await _finish(deps, job, control, "failed", None, str(err))
    control.admission = admission
    admitted = admission.result
    if admitted.placeholder_ids:
        await store.update_run(job.run_id, message_id=admitted.placeholder_ids[0])
    control.started.set()
    async with anyio.create_task_group() as tg:
        if job.timeout_minutes > 0:
            tg.start_soon(_timeout, deps, job, control)
        await sentinel.settled.wait()
        tg.cancel_scope.cancel()
    outcome = sentinel.outcome
    assert outcome is not None
    return await _finish(deps, job, control, outcome.status, outcome.text, outcome.error)


async def _owner(deps: TaskDeps, job: TaskJob) -> Principal:
    """The user the run acts as: its task's owner (the local admin for a task from before
    identity, or with auth off). A disabled or deleted owner's task does not run."""
    if job.owner_id is None:
        return LOCAL_ADMIN
    user = await deps.db.users.get(job.owner_id)
    if user is None or user.disabled:
        raise ValidationError("the task's owner is disabled: the task does not run")
    return Principal(user_id=user.id, name=user.name, role=user.role)


async def _may_use(deps: TaskDeps, caller: Principal, agent_id: str, owner_id: str | None) -> bool:
    """Whether ``caller`` may run the agent: an admin's, their own, or shared with them."""
    if caller.is_admin or owner_id == caller.user_id:
        return True
    return await deps.db.shares.access_of("agent", agent_id, caller.user_id) is not None


async def _session_for(deps: TaskDeps, job: TaskJob) -> str:
    agents = deps.db.agents
    if job.session_id is not None:
        session = await agents.get_session(job.session_id)
        if session is None or session.agent_id != job.agent_id:
            raise ValidationError(f"agent {job.agent_id!r} has no session {job.session_id!r}")
        return session.id
    if job.session_mode == "sticky" and job.sticky_session_id is not None:
        session = await agents.get_session(job.sticky_session_id)
        if session is not None and session.agent_id == job.agent_id:
            return session.id
    created = await agents.create_session(job.agent_id, title=job.name, owner_id=job.owner_id)
    if job.session_mode == "sticky" and job.schedule_id is not None:
        await deps.db.schedules.bind_sticky(job.schedule_id, created.id)
    return created.id


async def _timeout(deps: TaskDeps, job: TaskJob, control: RunControl) -> None:
    started = await deps.db.schedules.get_run(job.run_id)
    assert started is not None
    await deps.clock.sleep_until(started.started_at + timedelta(minutes=job.timeout_minutes))
    if control.sentinel is not None:
        control.sentinel.timed_out = f"Task timed out after {job.timeout_minutes} minute(s)"
    await stop_run(deps, control, TIMEOUT_REASON)


async def stop_run(deps: TaskDeps, control: RunControl, reason: str) -> None:
    """Abort a started run: its delivery listeners go first (nothing is delivered), then the
    session's turn is stopped; the sentinel settles from the ``paused`` terminal."""
    if control.conversation_id is None or control.session_id is None:
        return
    if control.admission is not None:
        for listener in control.deliveries:
            control.admission.detach(listener)
    control.deliveries = []
    await deps.conversations.stop(control.caller, control.conversation_id, reason=reason)


def _detach(deps: TaskDeps, control: RunControl) -> None:
    if control.conversation_id is None or control.admission is None:
        return
    listeners: list[Listener] = list(control.deliveries)
    if control.sentinel is not None:
        listeners.append(control.sentinel)
    for listener in listeners:
        control.admission.detach(listener)


async def _finish(
    deps: TaskDeps,
    job: TaskJob,
    control: RunControl,
    status: str,
    result: str | None,
    error: str | None,
) -> TaskRunRecord:
    _detach(deps, control)
    control.started.set()
    if status == "completed" and not result:
        result = "Completed"
    record = await deps.db.schedules.finish_run(
        job.run_id, status=status, finished_at=deps.clock.now(), result=result, error=error
    )
    if record.status == "failed" and job.deliver_to:
        duration = (record.duration_ms or 0) / 1000
        text = failure_text(job.name, duration, record.error or "unknown error")
        for target in job.deliver_to:
            try:
                await deps.delivery.send(target, text)
            except Exception:  # isolation boundary: a channel failing to send
                log.warning("task failure notice to %s/%s failed", target.channel, target.chat)
    return record
