"""The values the stores accept and return: frozen dataclasses, never ORM objects.

Callers outside ``drupe.persistence`` only ever see these records, so no lazy loading, session or
SQL leaks out of the package. ``parts``, ``stats`` and ``metadata`` are the JSON documents as
stored (``parts`` is the AI SDK UIMessage ``parts`` list).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from drupe.chunks.types import UIMessage
from drupe.ids import session_conversation_id

__all__ = [
    "AgentRecord",
    "AgentSessionRecord",
    "ApiKeyRecord",
    "ConversationRecord",
    "KeyScopes",
    "MessageRecord",
    "MessageRole",
    "MessageStatus",
    "NewMessage",
    "NewPlaceholder",
    "StoredResponse",
    "TerminalStatus",
]

MessageRole = Literal["user", "assistant", "system"]
MessageStatus = Literal["pending", "success", "paused", "error"]
TerminalStatus = Literal["success", "paused", "error"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationRecord:
    """A stored conversation. ``cursor`` feeds ``ConversationStore.list(before=...)``."""

    id: str
    title: str | None
    created_at: datetime
    updated_at: datetime
    trace_id: str | None
    metadata: Mapping[str, Any]
    owner_id: str | None = None
    """The user it belongs to (None: an admin's, from before identity)."""

    @property
    def cursor(self) -> str:
        """An opaque keyset cursor: list conversations updated before this one."""
        return f"{self.updated_at.isoformat()}|{self.id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageRecord:
    """A stored message, one node of its conversation's tree."""

    id: str
    conversation_id: str
    parent_id: str | None
    role: MessageRole
    parts: list[dict[str, Any]]
    status: MessageStatus
    model_id: str | None
    siblings_group_id: int | None
    stats: Mapping[str, Any] | None
    metadata: Mapping[str, Any] | None
    created_at: datetime
    updated_at: datetime
    runtime_resume_token: str | None = None
    """Agent sessions: the runtime's resume token when the row was written."""
    fence: int | None = None
    """Cluster mode: the fencing token of the owner that last wrote the row (None: unfenced)."""

    def as_ui_message(self) -> UIMessage:
        """Return the AI SDK UIMessage JSON (``{id, role, parts, metadata?}``) of this row."""
        message: UIMessage = {"id": self.id, "role": self.role, "parts": list(self.parts)}
        if self.metadata is not None:
            message["metadata"] = dict(self.metadata)
        return message


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiKeyRecord:
    """A stored API key. The plaintext key is never part of a record."""

    id: str
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    allowed_models: tuple[str, ...] | None = None
    """Model ids (``provider:*`` allowed) the key may use; None: any model."""
    allowed_agents: tuple[str, ...] | None = None
    """Agent ids the key may drive through the gateway; None: any agent."""
    requests_per_minute: int | None = None
    tokens_per_day: int | None = None
    owner_id: str | None = None
    """The user the key acts as (None: an admin's, from before identity)."""

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyScopes:
    """What a new key may do: allowed models and agents (None: any) and its budgets."""

    models: Sequence[str] | None = None
    agents: Sequence[str] | None = None
    requests_per_minute: int | None = None
    tokens_per_day: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredResponse:
    """A Responses-API response kept for ``previous_response_id`` and ``GET``."""

    id: str
    key_id: str | None
    model: str
    created_at: datetime
    input_items: list[dict[str, Any]]
    body: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class NewMessage:
    """A message to write as complete (status ``success``): a user, system or steer row."""

    id: str
    parts: Sequence[Mapping[str, Any]]
    role: MessageRole = "user"
    metadata: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NewPlaceholder:
    """A ``pending`` assistant row to write before a model starts answering."""

    message_id: str
    model_id: str | None
    metadata: Mapping[str, Any] | None = field(default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentRecord:
    """A stored agent. ``model_id`` is ``None`` when its model was removed."""

    id: str
    name: str
    driver_type: str
    model_id: str | None
    instructions: str | None
    workspace: str | None
    tools: tuple[str, ...]
    mcp_servers: tuple[str, ...]
    permission_mode: str
    created_at: datetime
    updated_at: datetime
    owner_id: str | None = None
    """The user it belongs to (None: an admin's, from before identity)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSessionRecord:
    """A stored agent session; its messages live in conversation ``conversation_id``."""

    id: str
    agent_id: str
    title: str | None
    created_at: datetime
    updated_at: datetime
    last_resume_token: str | None
    settings: Mapping[str, Any]
    trace_id: str | None = None
    """The session's trace id (the conversation's): every turn's ``ai.turn`` span is in it."""
    owner_id: str | None = None
    """The user it belongs to (None: an admin's, from before identity)."""

    @property
    def conversation_id(self) -> str:
        return session_conversation_id(self.id)
