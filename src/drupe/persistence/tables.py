"""The SQL schema of Drupe, as typed SQLAlchemy 2 ORM classes: the one place it is imported from.

Owns the conversation, message, agent and gateway tables, and re-exports the rest of the schema
so that importing this module registers every table on ``Base.metadata`` (the Alembic env and
the stores import from here): the column types and the base from ``columns``, the identity
tables from ``identity_tables``, the task and channel tables from ``work_tables``, the
settings tables from ``settings_tables``.

The Alembic migrations under ``migrations/versions`` are the source of truth for the deployed
schema; a test checks that the metadata here and the migrated database agree. This module issues
no SQL: only the stores do.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Final

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Date,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from drupe.persistence.columns import Base, JsonValue, UtcDateTime
from drupe.persistence.identity_tables import (
    AuditRow,
    AuthSessionRow,
    ChatLinkCodeRow,
    OidcLoginRow,
    ShareRow,
    SignInLinkRow,
    UserIdentityRow,
    UserRow,
    UserTokenRow,
)
from drupe.persistence.settings_tables import ProviderSettingRow
from drupe.persistence.work_tables import (
    ChannelBindingRow,
    ChannelDeliveryRow,
    ScheduleRow,
    TaskRunRow,
)

__all__ = [
    "MESSAGE_ROLES",
    "MESSAGE_STATUSES",
    "AgentRow",
    "AgentSessionRow",
    "ApiKeyRow",
    "AuditRow",
    "AuthSessionRow",
    "Base",
    "ChannelBindingRow",
    "ChannelDeliveryRow",
    "ChatLinkCodeRow",
    "ConversationRow",
    "ProviderSettingRow",
    "GatewayResponseRow",
    "GatewayUsageRow",
    "JsonValue",
    "MessageRow",
    "OidcLoginRow",
    "ScheduleRow",
    "ShareRow",
    "SignInLinkRow",
    "TaskRunRow",
    "UserIdentityRow",
    "UserRow",
    "UserTokenRow",
    "UtcDateTime",
]

MESSAGE_ROLES: Final = ("user", "assistant", "system")
MESSAGE_STATUSES: Final = ("pending", "success", "paused", "error")


class ConversationRow(Base):
    """One conversation: the address of a stream and the root of a message tree."""

    __tablename__ = "conversations"

    id: Mapped[str] = mapped_column(String(255), primary_key=True)
    title: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)
    trace_id: Mapped[str | None] = mapped_column(String(64))
    siblings_group_seq: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JsonValue, default=dict)
    owner_id: Mapped[str | None] = mapped_column(String(64), index=True)
    """The user it belongs to (None: an admin's, from before identity)."""

    __table_args__ = (Index(None, "updated_at", "id"),)


class MessageRow(Base):
    """One message, a node of the conversation's tree (``parent_id`` points to its parent)."""

    __tablename__ = "messages"

    id: Mapped[str] = mapped_column(String(255), primary_key=True)
    conversation_id: Mapped[str] = mapped_column(
        String(255), ForeignKey("conversations.id", ondelete="CASCADE")
    )
    parent_id: Mapped[str | None] = mapped_column(
        String(255), ForeignKey("messages.id", ondelete="CASCADE")
    )
    role: Mapped[str] = mapped_column(String(16))
    parts: Mapped[list[dict[str, Any]]] = mapped_column(JsonValue, default=list)
    status: Mapped[str] = mapped_column(String(16))
    model_id: Mapped[str | None] = mapped_column(String(255))
    siblings_group_id: Mapped[int | None] = mapped_column(Integer)
    stats: Mapped[dict[str, Any] | None] = mapped_column(JsonValue)
    meta: Mapped[dict[str, Any] | None] = mapped_column("metadata", JsonValue)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)
    runtime_resume_token: Mapped[str | None] = mapped_column(Text)
    """Agent sessions: the runtime's resume token when this row was written (opaque)."""
    fence: Mapped[int | None] = mapped_column(BigInteger)
    """Cluster mode: the fencing token of the owner that last wrote the row (NULL: never
    fenced, a single-node write). A fenced write never lowers it."""

    __table_args__ = (
        CheckConstraint("role IN ('user', 'assistant', 'system')", name="role"),
        CheckConstraint("status IN ('pending', 'success', 'paused', 'error')", name="status"),
        Index(None, "conversation_id", "created_at"),
        Index(None, "parent_id"),
        Index(
            "ix_messages_pending",
            "conversation_id",
            sqlite_where=text("status = 'pending'"),
            postgresql_where=text("status = 'pending'"),
        ),
    )


class ApiKeyRow(Base):
    """One gateway API key; only the SHA-256 of the key is stored."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    prefix: Mapped[str] = mapped_column(String(32), index=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    last_used_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    allowed_models: Mapped[list[str] | None] = mapped_column(JsonValue)
    """Model ids (or ``provider:*`` patterns) this key may use; None: any."""
    allowed_agents: Mapped[list[str] | None] = mapped_column(JsonValue)
    """Agent ids this key may drive; None: any."""
    requests_per_minute: Mapped[int | None] = mapped_column(Integer)
    tokens_per_day: Mapped[int | None] = mapped_column(Integer)
    owner_id: Mapped[str | None] = mapped_column(String(64), index=True)
    """The user it belongs to (None: an admin's, from before identity)."""


class GatewayResponseRow(Base):
    """A stored OpenAI Responses-API response (``store: true``), owned by the key that made it."""

    __tablename__ = "gateway_responses"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    key_id: Mapped[str | None] = mapped_column(String(64), index=True)
    model: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    input_items: Mapped[list[dict[str, Any]]] = mapped_column(JsonValue, default=list)
    """Every input item the response answered (the chain of earlier responses included)."""
    body: Mapped[dict[str, Any]] = mapped_column(JsonValue, default=dict)
    """The ``response`` object as the API returned it."""
    owner_id: Mapped[str | None] = mapped_column(String(64), index=True)
    """The user it belongs to (None: an admin's, from before identity)."""


class GatewayUsageRow(Base):
    """Gateway traffic of one group (UTC day, key, user, model, dialect): one row per group,
    its counters added to in place (``persistence.gateway_usage``), never one row per request."""

    __tablename__ = "gateway_usage"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    """The SHA-256 (hex) of the group's columns: the upsert's conflict target."""
    day: Mapped[date] = mapped_column(Date, index=True)
    key_id: Mapped[str | None] = mapped_column(String(64), index=True)
    """The API key that made the requests (None: keys not required)."""
    owner_id: Mapped[str | None] = mapped_column(String(255), index=True)
    """The user the requests acted as (None: unknown)."""
    model: Mapped[str] = mapped_column(String(255))
    dialect: Mapped[str] = mapped_column(String(32))
    requests: Mapped[int] = mapped_column(BigInteger)
    input_tokens: Mapped[int] = mapped_column(BigInteger)
    output_tokens: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class AgentRow(Base):
    """An agent: a driver type, a model, instructions, a workspace and a tool selection."""

    __tablename__ = "agents"

    id: Mapped[str] = mapped_column(String(255), primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    driver_type: Mapped[str] = mapped_column(String(64))
    model_id: Mapped[str | None] = mapped_column(String(255))
    instructions: Mapped[str | None] = mapped_column(Text)
    workspace: Mapped[str | None] = mapped_column(Text)
    tools: Mapped[list[str]] = mapped_column(JsonValue, default=list)
    mcp_servers: Mapped[list[str]] = mapped_column(JsonValue, default=list)
    permission_mode: Mapped[str] = mapped_column(String(32))
    owner_id: Mapped[str | None] = mapped_column(String(64), index=True)
    """The user it belongs to (None: an admin's, from before identity)."""
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)

    __table_args__ = (
        CheckConstraint(
            "permission_mode IN ('default', 'accept-edits', 'plan', 'bypass')",
            name="permission_mode",
        ),
    )


class AgentSessionRow(Base):
    """A session of an agent; its messages live in conversation ``agent-session:<id>``."""

    __tablename__ = "agent_sessions"

    id: Mapped[str] = mapped_column(String(255), primary_key=True)
    agent_id: Mapped[str] = mapped_column(
        String(255), ForeignKey("agents.id", ondelete="CASCADE"), index=True
    )
    title: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)
    last_resume_token: Mapped[str | None] = mapped_column(Text)
    settings: Mapped[dict[str, Any]] = mapped_column(JsonValue, default=dict)
    trace_id: Mapped[str | None] = mapped_column(String(64))
    """The session's container trace id (32 hex digits): every turn's ``ai.turn`` span is in it."""
    owner_id: Mapped[str | None] = mapped_column(String(64), index=True)
    """The user it belongs to (None: an admin's, from before identity)."""
