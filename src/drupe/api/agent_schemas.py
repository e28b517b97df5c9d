"""Request bodies and JSON answers of the agent and agent-session routes (``gateway.agents``).

Bodies are pydantic models with camelCase keys, as the rest of the browser API; unknown keys
are refused (a typo in ``permissionMode`` must not be silently ignored). Answers are built by
``agent_json`` / ``session_json`` so every route spells an agent or a session the same way. The
runtime part of a session (``runtime_json``) is read from the host's entry; it is a snapshot of
what the host decided, never a decision of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from drupe.persistence.records import AgentRecord, AgentSessionRecord

if TYPE_CHECKING:
    from drupe.sessions.host import SessionEntry

__all__ = [
    "CreateAgent",
    "CreateSession",
    "UpdateAgent",
    "UpdateSession",
    "agent_json",
    "runtime_json",
    "session_json",
]

PermissionModeIn = Literal["default", "accept-edits", "plan", "bypass"]


class CreateAgent(BaseModel):
    """``POST /api/agents``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    driverType: str = Field(
        default="inprocess", min_length=1, max_length=64, description="See GET /api/drivers."
    )
    modelId: str | None = Field(
        default=None, min_length=1, max_length=256, description="Default: the server's model."
    )
    instructions: str | None = Field(default=None, max_length=100_000)
    workspace: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="A directory; default: <data dir>/workspaces/<agent id>.",
    )
    tools: list[str] = Field(default_factory=list, max_length=256)
    mcpServers: list[str] = Field(default_factory=list, max_length=256)
    permissionMode: PermissionModeIn = "default"


class UpdateAgent(BaseModel):
    """``PATCH /api/agents/{id}``: only the keys present change (``modelId: null`` removes it)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=200)
    driverType: str | None = Field(default=None, min_length=1, max_length=64)
    modelId: str | None = Field(default=None, min_length=1, max_length=256)
    instructions: str | None = Field(default=None, max_length=100_000)
    workspace: str | None = Field(default=None, min_length=1, max_length=4096)
    tools: list[str] | None = Field(default=None, max_length=256)
    mcpServers: list[str] | None = Field(default=None, max_length=256)
    permissionMode: PermissionModeIn | None = None


class CreateSession(BaseModel):
    """``POST /api/agents/{id}/sessions``."""

    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(default=None, max_length=500)
    settings: dict[str, Any] = Field(
        default_factory=dict, description="Driver settings (inprocess: shell, shell_timeout_s)."
    )


class UpdateSession(BaseModel):
    """``PATCH /api/sessions/{id}``: rename."""

    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(max_length=500)


_AGENT_KEYS = {
    "name": "name",
    "driverType": "driver_type",
    "modelId": "model_id",
    "instructions": "instructions",
    "workspace": "workspace",
    "tools": "tools",
    "mcpServers": "mcp_servers",
    "permissionMode": "permission_mode",
}


def store_fields(body: BaseModel) -> dict[str, Any]:
    """The keys the client sent, renamed to ``AgentStore`` field names."""
    return {_AGENT_KEYS[k]: getattr(body, k) for k in body.model_fields_set if k in _AGENT_KEYS}


def agent_json(record: AgentRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "name": record.name,
        "driverType": record.driver_type,
        "modelId": record.model_id,
        "instructions": record.instructions,
        "workspace": record.workspace,
        "tools": list(record.tools),
        "mcpServers": list(record.mcp_servers),
        "permissionMode": record.permission_mode,
        "ownerId": record.owner_id,
        "createdAt": record.created_at.isoformat(),
        "updatedAt": record.updated_at.isoformat(),
    }


def runtime_json(entry: SessionEntry | None) -> dict[str, Any]:
    """What the host knows about a session right now (idle defaults without an entry)."""
    if entry is None:
        return {
            "busy": False,
            "compacting": False,
            "execution": "idle",
            "connection": "disconnected",
            "pendingFollowUps": [],
            "pendingApprovals": [],
            "contextUsage": None,
            "lastTerminal": None,
            "commands": [],
        }
    from drupe.sessions.state import is_busy

    state = entry.state
    usage: Mapping[str, Any] | None = entry.context_usage
    return {
        "busy": is_busy(state),
        "compacting": state.compacting,
        "execution": state.execution.kind,
        "connection": state.connection,
        "pendingFollowUps": [item.user_message_id for item in state.queue],
        "pendingApprovals": [
            {"approvalId": approval_id, "toolCallId": tool_call_id}
            for approval_id, (tool_call_id, _headless) in entry.approvals.items()
        ],
        "contextUsage": dict(usage) if usage is not None else None,
        "lastTerminal": state.last_terminal,
        "commands": list(entry.commands),
    }


def session_json(
    record: AgentSessionRecord, status: str, entry: SessionEntry | None
) -> dict[str, Any]:
    return {
        "id": record.id,
        "agentId": record.agent_id,
        "title": record.title,
        "conversationId": record.conversation_id,
        "settings": dict(record.settings),
        "status": status,
        "createdAt": record.created_at.isoformat(),
        "updatedAt": record.updated_at.isoformat(),
        "runtime": runtime_json(entry),
    }
