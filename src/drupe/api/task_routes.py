"""REST for agent tasks: schedules, heartbeats and background runs (``drupe.tasks``).

Schedules (``/api/schedules``): list, create, read, edit (``PATCH``), delete, ``run`` (run now),
``pause``, ``resume``, ``runs`` (history, newest first). Each schedule answer carries its
``nextRunAt`` (null when paused or finished) and ``lastRunAt``.

Heartbeat: ``PUT /api/agents/{id}/heartbeat`` creates or updates the agent's heartbeat schedule.

Background runs (LangGraph's background runs): ``POST /api/agents/{id}/runs`` answers ``202``
with the run once its turn is admitted; ``GET /api/runs/{id}`` gives its status and result (the
answer so far while it runs); its ``conversationId`` is watched and resumed over the usual stream
routes (``GET /api/chat/{conversationId}/stream``); ``POST /api/runs/{id}/cancel`` stops it (the
partial answer is kept). Background chat turns (``POST /api/chat`` with ``background: true``)
are runs too.

Bad input is a 422 that says what is wrong; unknown ids are 404.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from drupe.admission.access import Action
from drupe.errors import NotFoundError
from drupe.http.state import get_caller, get_runtime
from drupe.persistence.schedule_records import ScheduleRecord, TaskRunRecord

if TYPE_CHECKING:
    from drupe.app import Runtime
    from drupe.identity.resources import Resources
    from drupe.tasks.service import TaskService

__all__ = ["router", "run_json"]

router = APIRouter(tags=["tasks"])


class TriggerIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["cron", "interval", "once"]
    expr: str | None = Field(default=None, max_length=200, description="cron: 5 fields")
    timezone: str | None = Field(default=None, max_length=64, description="cron: IANA zone")
    seconds: int | None = Field(default=None, description="interval: seconds (>= 60)")
    at: str | None = Field(default=None, max_length=64, description="once: ISO 8601 with offset")

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class ChatTargetIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    channel: str = Field(min_length=1, max_length=256)
    chat: str = Field(min_length=1, max_length=256)


class ScheduleIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agentId: str = Field(min_length=1, max_length=256)
    name: str = Field(min_length=1, max_length=200)
    prompt: str = Field(min_length=1, max_length=100_000)
    trigger: TriggerIn
    timeoutMinutes: int | None = Field(default=None, description="0: no timeout; default 2")
    sessionMode: Literal["fresh", "sticky"] = "fresh"
    deliverTo: list[ChatTargetIn] = Field(default_factory=list, max_length=50)
    missedPolicy: Literal["skip", "run-once"] = "skip"
    enabled: bool = True


class ScheduleEdit(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=200)
    prompt: str | None = Field(default=None, min_length=1, max_length=100_000)
    trigger: TriggerIn | None = None
    timeoutMinutes: int | None = None
    sessionMode: Literal["fresh", "sticky"] | None = None
    deliverTo: list[ChatTargetIn] | None = Field(default=None, max_length=50)
    missedPolicy: Literal["skip", "run-once"] | None = None
    enabled: bool | None = None


class HeartbeatIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    intervalMinutes: int = Field(default=30, ge=1, le=1440)
    deliverTo: list[ChatTargetIn] = Field(default_factory=list, max_length=50)


class RunIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(min_length=1, max_length=100_000)
    sessionId: str | None = Field(default=None, max_length=256, description="default: new")
    timeoutMinutes: int = Field(default=0, ge=0, le=1440, description="0: no timeout")


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def schedule_json(record: ScheduleRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "name": record.name,
        "agentId": record.agent_id,
        "kind": record.kind,
        "prompt": record.prompt,
        "trigger": record.trigger,
        "timeoutMinutes": record.timeout_minutes,
        "sessionMode": record.session_mode,
        "stickySessionId": record.sticky_session_id,
        "deliverTo": list(record.deliver_to),
        "missedPolicy": record.missed_policy,
        "enabled": record.enabled,
        "nextRunAt": _iso(record.next_run_at) if record.enabled else None,
        "lastRunAt": _iso(record.last_run_at),
        "createdAt": _iso(record.created_at),
        "updatedAt": _iso(record.updated_at),
    }


def run_json(record: TaskRunRecord, *, live_text: str | None = None) -> dict[str, Any]:
    return {
        "id": record.id,
        "scheduleId": record.schedule_id,
        "kind": record.kind,
        "agentId": record.agent_id,
        "sessionId": record.session_id,
        "conversationId": record.conversation_id,
        "messageId": record.message_id,
        "scheduledFor": _iso(record.scheduled_for),
        "startedAt": _iso(record.started_at),
        "finishedAt": _iso(record.finished_at),
        "status": record.status,
        "nodeId": record.node_id,
        "result": live_text if record.status == "running" and live_text else record.result,
        "error": record.error,
        "durationMs": record.duration_ms,
    }


def _tasks(runtime: Runtime) -> TaskService:
    if runtime.tasks is None:
        raise RuntimeError("the task service is not running")
    return runtime.tasks


def _targets(items: list[ChatTargetIn] | None) -> list[dict[str, str]] | None:
    return None if items is None else [item.model_dump() for item in items]


def _resources(runtime: Runtime) -> Resources:
    assert runtime.resources is not None, "open_runtime builds the resource lookups"
    return runtime.resources


async def _agent(request: Request, agent_id: str, action: Action) -> None:
    """404 (in the tasks' own words) unless the caller may ``action`` the agent."""
    try:
        await _resources(get_runtime(request)).agent(get_caller(request), agent_id, action)
    except NotFoundError:
        raise NotFoundError("agent", agent_id, f"Agent not found: {agent_id}") from None


async def _schedule(request: Request, schedule_id: str) -> ScheduleRecord:
    """The schedule, if it is the caller's (an admin's: any; else 404)."""
    return await _resources(get_runtime(request)).schedule(get_caller(request), schedule_id)


@router.get("/api/schedules")
async def list_schedules(request: Request, agentId: str | None = None) -> dict[str, Any]:
    runtime = get_runtime(request)
    owner = _resources(runtime).owner_filter(get_caller(request))
    records = await runtime.db.schedules.list(agent_id=agentId, owner_id=owner)
    return {"items": [schedule_json(r) for r in records]}


@router.post("/api/schedules", status_code=201)
async def create_schedule(body: ScheduleIn, request: Request) -> dict[str, Any]:
    runtime = get_runtime(request)
    await _agent(request, body.agentId, "read")
    record = await _tasks(runtime).create_schedule(
        agent_id=body.agentId,
        name=body.name,
        prompt=body.prompt,
        trigger=body.trigger.as_dict(),
        timeout_minutes=body.timeoutMinutes,
        session_mode=body.sessionMode,
        deliver_to=_targets(body.deliverTo) or [],
        missed_policy=body.missedPolicy,
        enabled=body.enabled,
    )
    owner = _resources(runtime).owner_of_new(get_caller(request))
    record = await runtime.db.schedules.update(record.id, owner_id=owner)
    return schedule_json(record)


@router.get("/api/schedules/{schedule_id}")
async def get_schedule(schedule_id: str, request: Request) -> dict[str, Any]:
    return schedule_json(await _schedule(request, schedule_id))


@router.patch("/api/schedules/{schedule_id}")
async def edit_schedule(schedule_id: str, body: ScheduleEdit, request: Request) -> dict[str, Any]:
    await _schedule(request, schedule_id)
    record = await _tasks(get_runtime(request)).update_schedule(
        schedule_id,
        name=body.name,
        prompt=body.prompt,
        trigger=body.trigger.as_dict() if body.trigger is not None else None,
        timeout_minutes=body.timeoutMinutes,
        session_mode=body.sessionMode,
        deliver_to=_targets(body.deliverTo),
        missed_policy=body.missedPolicy,
        enabled=body.enabled,
    )
    return schedule_json(record)


@router.delete("/api/schedules/{schedule_id}", status_code=204)
async def delete_schedule(schedule_id: str, request: Request) -> Response:
    tasks = _tasks(get_runtime(request))
    await _schedule(request, schedule_id)
    await tasks.delete_schedule(schedule_id)
    return Response(status_code=204)


@router.post("/api/schedules/{schedule_id}/run", status_code=202)
async def run_schedule_now(schedule_id: str, request: Request) -> dict[str, Any]:
    await _schedule(request, schedule_id)
    return run_json(await _tasks(get_runtime(request)).run_now(schedule_id))


@router.post("/api/schedules/{schedule_id}/pause")
async def pause_schedule(schedule_id: str, request: Request) -> dict[str, Any]:
    await _schedule(request, schedule_id)
    return schedule_json(await _tasks(get_runtime(request)).pause(schedule_id))


@router.post("/api/schedules/{schedule_id}/resume")
async def resume_schedule(schedule_id: str, request: Request) -> dict[str, Any]:
    await _schedule(request, schedule_id)
    return schedule_json(await _tasks(get_runtime(request)).resume(schedule_id))


@router.get("/api/schedules/{schedule_id}/runs")
async def schedule_runs(
    schedule_id: str, request: Request, limit: int = Query(default=50, ge=1, le=500)
) -> dict[str, Any]:
    runtime = get_runtime(request)
    tasks = _tasks(runtime)
    caller = get_caller(request)
    try:
        await _schedule(request, schedule_id)
        records = await tasks.history(schedule_id, limit)
    except NotFoundError:
        if await runtime.db.schedules.get(schedule_id) is not None:
            raise  # another member's
        # A deleted schedule keeps its runs (issue 23.14): those the caller may see.
        records = []
        for record in await tasks.history(schedule_id, limit):
            try:
                await _resources(runtime).run(caller, record.id)
            except NotFoundError:
                continue
            records.append(record)
    return {"items": [run_json(r, live_text=tasks.live_text(r.id)) for r in records]}


@router.put("/api/agents/{agent_id}/heartbeat")
async def put_heartbeat(agent_id: str, body: HeartbeatIn, request: Request) -> dict[str, Any]:
    await _agent(request, agent_id, "write")
    record = await _tasks(get_runtime(request)).set_heartbeat(
        agent_id,
        enabled=body.enabled,
        interval_minutes=body.intervalMinutes,
        deliver_to=_targets(body.deliverTo) or [],
    )
    return schedule_json(record)


@router.post("/api/agents/{agent_id}/runs", status_code=202)
async def start_run(agent_id: str, body: RunIn, request: Request) -> dict[str, Any]:
    await _agent(request, agent_id, "write")
    if body.sessionId is not None:
        await _resources(get_runtime(request)).session(get_caller(request), body.sessionId)
    tasks = _tasks(get_runtime(request))
    record = await tasks.start_background(
        agent_id,
        body.prompt,
        session_id=body.sessionId,
        timeout_minutes=body.timeoutMinutes,
        owner_id=_resources(get_runtime(request)).owner_of_new(get_caller(request)),
    )
    return run_json(record, live_text=tasks.live_text(record.id))


@router.get("/api/runs/{run_id}")
async def get_run(run_id: str, request: Request) -> dict[str, Any]:
    runtime = get_runtime(request)
    tasks = _tasks(runtime)
    await _resources(runtime).run(get_caller(request), run_id)
    record = await tasks.get_run(run_id)
    body = run_json(record, live_text=tasks.live_text(run_id))
    if record.status != "running" and record.message_id is not None:
        row = await runtime.db.messages.get(record.message_id)
        if row is not None:  # the whole answer (the row keeps only 200 characters)
            body["result"] = (
                "".join(p.get("text", "") for p in row.parts if p.get("type") == "text").strip()
                or body["result"]
            )
    return body


@router.post("/api/runs/{run_id}/cancel")
async def cancel_run(run_id: str, request: Request) -> dict[str, Any]:
    tasks = _tasks(get_runtime(request))
    await _resources(get_runtime(request)).run(get_caller(request), run_id)
    cancelled = await tasks.cancel_run(run_id)
    record = await tasks.wait_run(run_id) if cancelled else await tasks.get_run(run_id)
    return {"cancelled": cancelled, "run": run_json(record)}
