"""Agent and agent-session REST routes, and the driver list.

* ``GET/POST /api/agents``, ``GET/PATCH/DELETE /api/agents/{id}``: an agent is validated before
  anything is written: its driver type must be registered (the 422 names the known ones), its
  model must resolve when the driver checks models (``inprocess`` resolves through the model
  registry; ``claude-code`` takes the CLI's own model names), and the driver must accept a
  session of it (``validate_session``: workspace, MCP servers). Without a ``workspace`` an
  agent gets ``<data dir>/workspaces/<agent id>`` (created); a workspace the client names must
  be an existing directory given by an absolute path (never created: reference §4.4). An edit
  is pushed to live sessions (``AgentSessionHost.agent_updated``).
* ``GET/POST /api/agents/{id}/sessions``, ``GET /api/sessions``, ``GET/PATCH/DELETE
  /api/sessions/{id}``: a session answer carries its ``conversationId`` (``agent-session:<id>``)
  and the host's runtime state (busy, compacting, context usage, queued follow-ups, pending
  approvals). Deleting a session (or its agent) first stops its live turn (the partial is
  persisted, then deleted with the rest) and closes its runtime connection. A member an agent
  is shared with lists every session of it (``/api/agents/{id}/sessions``) and reads one
  (``GET /api/sessions/{id}``), as ``OwnerPolicy`` shares their conversations; renaming and
  deleting a session stay its owner's (or an admin's).
* ``POST /api/sessions/{id}/approvals``: answers agent approvals in place (the driver holds
  them); each decision reports whether the driver resolved it (the session's owner, an admin,
  or a member its agent is shared with to write).
* ``GET /api/drivers``: the registered driver types.

The checks an agent passes before it is written are in ``agent_checks``.

Sessions stream through the chat and event routes (``POST /api/chat`` with
``id = agent-session:<id>``, ``GET /api/chat/{id}/stream``, ``POST /api/chat/{id}/stop``,
``GET /api/conversations/{id}/events``); this module never streams. Errors are raised, and
mapped to HTTP by ``gateway.errors`` only.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query, Request, Response

from drupe.admission.access import Action
from drupe.api.agent_checks import driver_of, record_fields, validate_agent
from drupe.api.agent_schemas import (
    CreateAgent,
    CreateSession,
    UpdateAgent,
    UpdateSession,
    agent_json,
    session_json,
    store_fields,
)
from drupe.api.schemas import ApprovalsRequest
from drupe.errors import ValidationError
from drupe.http.errors import Forbidden, HttpError
from drupe.http.state import get_board, get_caller, get_runtime
from drupe.persistence.agents import PERMISSION_MODES, session_conversation_id
from drupe.streaming.approval_rules import Decision

if TYPE_CHECKING:
    from drupe.app import Runtime
    from drupe.http.state import StatusBoard
    from drupe.identity.resources import Resources
    from drupe.persistence.records import AgentRecord, AgentSessionRecord

__all__ = ["NotFound", "router"]

router = APIRouter(tags=["agents"])

_ID_MAX = 256


class NotFound(HttpError):
    status_code = 404


def _resources(runtime: Runtime) -> Resources:
    assert runtime.resources is not None, "open_runtime builds the resource lookups"
    return runtime.resources


async def _agent(
    runtime: Runtime, request: Request, agent_id: str, action: Action = "read"
) -> AgentRecord:
    """The agent, if the caller may ``action`` it (else 404, like a missing one)."""
    return await _resources(runtime).agent(get_caller(request), agent_id, action)


async def _session(
    runtime: Runtime, request: Request, session_id: str, shared: Action | None = None
) -> AgentSessionRecord:
    """The session, if it is the caller's (an admin's: any; with ``shared``, also one of an
    agent shared with the caller for that action; else 404)."""
    return await _resources(runtime).session(get_caller(request), session_id, shared)


def _check_code(runtime: Runtime, request: Request, driver_type: str, tools: Sequence[str]) -> None:
    if not _resources(runtime).may_run_code(get_caller(request), driver_type, tuple(tools)):
        raise Forbidden(
            f"only an admin may create or change an agent that runs code (the {driver_type} "
            "driver, or the shell and python_exec tools); ask an admin to share one with you"
        )


def _session_json(
    runtime: Runtime, board: StatusBoard, record: AgentSessionRecord
) -> dict[str, Any]:
    host = runtime.sessions
    entry = host.entry(record.id) if host is not None else None
    return session_json(record, board.status(record.conversation_id), entry)


def _forget(runtime: Runtime, board: StatusBoard, session_id: str) -> None:
    conversation_id = session_conversation_id(session_id)
    runtime.manager.forget(conversation_id)
    board.forget(conversation_id)


# --- drivers ----------------------------------------------------------------------------------


@router.get("/api/drivers")
async def list_drivers(request: Request) -> dict[str, Any]:
    """The registered agent-runtime drivers, and the permission modes an agent may have."""
    runtime = get_runtime(request)
    types = runtime.drivers.types() if runtime.drivers is not None else []
    items = [
        {
            "type": t,
            "checksModels": hasattr(runtime.drivers.get(t), "check_model")
            if runtime.drivers is not None
            else False,
        }
        for t in types
    ]
    return {"items": items, "permissionModes": list(PERMISSION_MODES)}


# --- agents -----------------------------------------------------------------------------------


@router.get("/api/agents")
async def list_agents(request: Request) -> dict[str, Any]:
    """Every agent, oldest first."""
    runtime = get_runtime(request)
    visible = _resources(runtime).owner_filter(get_caller(request))
    return {
        "items": [agent_json(a) for a in await runtime.db.agents.list_agents(visible_to=visible)]
    }


@router.post("/api/agents", status_code=201)
async def create_agent(body: CreateAgent, request: Request) -> dict[str, Any]:
    """Create an agent (validated against the drivers and the model registry first)."""
    runtime = get_runtime(request)
    agent_id = f"agent_{uuid.uuid4().hex}"
    fields = store_fields(body)
    fields.update(
        name=body.name.strip(),
        driver_type=body.driverType,
        tools=body.tools,
        mcp_servers=body.mcpServers,
        permission_mode=body.permissionMode,
    )
    driver = driver_of(runtime, body.driverType)
    if body.modelId is None:
        if not hasattr(driver, "check_model"):
            raise ValidationError(f"modelId: the {body.driverType} driver needs a model id")
        fields["model_id"] = runtime.models.default_model_id()
    if body.workspace is None:
        fields["workspace"] = str(runtime.settings.data_dir / "workspaces" / agent_id)
    validate_agent(runtime, agent_id, fields, set(store_fields(body)))
    _check_code(runtime, request, body.driverType, body.tools)
    record = await runtime.db.agents.create_agent(
        agent_id=agent_id, owner_id=_resources(runtime).owner_of_new(get_caller(request)), **fields
    )
    return agent_json(record)


@router.get("/api/agents/{agent_id}")
async def get_agent(agent_id: str, request: Request) -> dict[str, Any]:
    return agent_json(await _agent(get_runtime(request), request, agent_id))


@router.patch("/api/agents/{agent_id}")
async def update_agent(agent_id: str, body: UpdateAgent, request: Request) -> dict[str, Any]:
    """Change some fields; live sessions of the agent are reconciled with the edit."""
    runtime = get_runtime(request)
    current = await _agent(runtime, request, agent_id, "write")
    changes = store_fields(body)
    for key in ("name", "driver_type", "tools", "mcp_servers", "permission_mode", "workspace"):
        if key in changes and changes[key] is None:
            raise ValidationError(f"{key}: cannot be null")
    if "name" in changes:
        changes["name"] = changes["name"].strip()
    if not changes:
        return agent_json(current)
    merged = {**record_fields(current), **changes}
    validate_agent(runtime, agent_id, merged, set(changes))
    _check_code(runtime, request, merged["driver_type"], merged.get("tools") or ())
    record = await runtime.db.agents.update_agent(agent_id, **changes)
    host = runtime.sessions
    if host is not None:
        await host.agent_updated(agent_id)
    return agent_json(record)


@router.delete("/api/agents/{agent_id}", status_code=204, response_class=Response)
async def delete_agent(agent_id: str, request: Request) -> Response:
    """Stop the agent's live sessions, then delete it with its sessions and their messages."""
    runtime = get_runtime(request)
    board = get_board(request)
    agent = await _agent(runtime, request, agent_id, "write")
    if _resources(runtime).owner_filter(get_caller(request)) not in (None, agent.owner_id):
        raise NotFound(f"unknown agent {agent_id!r}")  # a write share does not delete
    sessions = await runtime.db.agents.list_sessions(agent_id)
    for session in sessions:
        await runtime.conversations.close_session(get_caller(request), session.id)
    await runtime.db.agents.delete_agent(agent_id)
    for session in sessions:
        _forget(runtime, board, session.id)
    return Response(status_code=204)


# --- sessions ---------------------------------------------------------------------------------


@router.get("/api/agents/{agent_id}/sessions")
async def list_agent_sessions(agent_id: str, request: Request) -> dict[str, Any]:
    """The agent's sessions, oldest first, with their runtime state (a member: their own, or
    every one's when the agent is shared with them)."""
    runtime = get_runtime(request)
    board = get_board(request)
    agent = await _agent(runtime, request, agent_id)
    owner = await _resources(runtime).agent_sessions_owner(get_caller(request), agent)
    records = await runtime.db.agents.list_sessions(agent_id, owner_id=owner)
    return {"items": [_session_json(runtime, board, r) for r in records]}


@router.post("/api/agents/{agent_id}/sessions", status_code=201)
async def create_session(agent_id: str, body: CreateSession, request: Request) -> dict[str, Any]:
    """Create a session; chat with it at ``POST /api/chat`` with its ``conversationId``."""
    runtime = get_runtime(request)
    agent = await _agent(runtime, request, agent_id)
    if body.settings and body.settings.get("shell"):
        _check_code(runtime, request, agent.driver_type, ("shell",))
    record = await runtime.db.agents.create_session(
        agent_id,
        title=body.title,
        settings=body.settings,
        owner_id=_resources(runtime).owner_of_new(get_caller(request)),
    )
    return _session_json(runtime, get_board(request), record)


@router.get("/api/sessions")
async def list_sessions(
    request: Request,
    agent_id: str | None = Query(default=None, alias="agentId", max_length=_ID_MAX),
) -> dict[str, Any]:
    """Every session (or one agent's), oldest first, with their runtime state.

    Each also says ``fromTask`` (a task run created or used it, so the sidebar leaves it to the
    task's run list) and ``lastActivityAt`` (its conversation's last update)."""
    runtime = get_runtime(request)
    board = get_board(request)
    owner = _resources(runtime).owner_filter(get_caller(request))
    records = await runtime.db.agents.list_sessions(agent_id, owner_id=owner)
    from_tasks = await runtime.db.schedules.task_session_ids([r.id for r in records])
    items = []
    for record in records:
        conversation = await runtime.db.conversations.get(record.conversation_id)
        active = conversation.updated_at if conversation is not None else record.updated_at
        items.append(
            {
                **_session_json(runtime, board, record),
                "fromTask": record.id in from_tasks,
                "lastActivityAt": max(active, record.updated_at).isoformat(),
            }
        )
    return {"items": items}


@router.get("/api/sessions/{session_id}")
async def get_session(session_id: str, request: Request) -> dict[str, Any]:
    """A session, its conversation id and the host's runtime state."""
    runtime = get_runtime(request)
    record = await _session(runtime, request, session_id, "read")
    if runtime.sessions is not None:
        # Fetched on this read only (at most once per turn): nobody asks, nothing is fetched.
        await runtime.sessions.refresh_context_usage(session_id)
    return _session_json(runtime, get_board(request), record)


@router.patch("/api/sessions/{session_id}")
async def rename_session(session_id: str, body: UpdateSession, request: Request) -> dict[str, Any]:
    """Rename a session (and its conversation)."""
    runtime = get_runtime(request)
    await _session(runtime, request, session_id)
    record = await runtime.db.agents.update_session(session_id, title=body.title)
    await runtime.db.conversations.rename(record.conversation_id, body.title)
    return _session_json(runtime, get_board(request), record)


@router.delete("/api/sessions/{session_id}", status_code=204, response_class=Response)
async def delete_session(session_id: str, request: Request) -> Response:
    """Stop the live turn (its partial persisted), then delete the session and its messages."""
    runtime = get_runtime(request)
    board = get_board(request)
    await _session(runtime, request, session_id)
    await runtime.conversations.close_session(get_caller(request), session_id)
    await runtime.db.agents.delete_session(session_id)
    _forget(runtime, board, session_id)
    return Response(status_code=204)


@router.post("/api/sessions/{session_id}/approvals")
async def answer_approvals(
    session_id: str, body: ApprovalsRequest, request: Request
) -> dict[str, Any]:
    """Answer agent approvals in place; ``ok`` is False for one the driver no longer holds."""
    runtime = get_runtime(request)
    await _session(runtime, request, session_id, "write")
    results = []
    for decision in body.decisions:
        # The session's owner (in cluster mode, wherever it runs) holds the pending decision.
        outcome = await runtime.conversations.approve(
            get_caller(request),
            session_conversation_id(session_id),
            [
                Decision(
                    approval_id=decision.approvalId,
                    approved=decision.approved,
                    reason=decision.reason,
                )
            ],
        )
        results.append({"approvalId": decision.approvalId, "ok": outcome.ok})
    return {"ok": all(r["ok"] for r in results), "results": results}
