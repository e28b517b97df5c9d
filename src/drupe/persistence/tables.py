"""The SQL schema of Drupe, as typed SQLAlchemy 2 ORM classes.

Owns the table, column, constraint and index definitions, and the two column types the schema
needs on both dialects: ``UtcDateTime`` (timezone-aware UTC in, timezone-aware UTC out, even on
SQLite, which stores no offset) and ``JsonValue`` (``JSON`` on SQLite, ``JSONB`` on PostgreSQL).

The Alembic migrations under ``migrations/versions`` are the source of truth for the deployed
schema; a test checks that the metadata here and the migrated database agree. This module issues
no SQL: only the stores do.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any, Final

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Date,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import JSON, DateTime, TypeDecorator, TypeEngine

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
    "ConversationRow",
    "GatewayResponseRow",
    "GatewayUsageRow",
    "JsonValue",
    "MessageRow",
    "ScheduleRow",
    "ShareRow",
    "SignInLinkRow",
    "TaskRunRow",
    "UserRow",
    "UserTokenRow",
    "UtcDateTime",
]

MESSAGE_ROLES: Final = ("user", "assistant", "system")
MESSAGE_STATUSES: Final = ("pending", "success", "paused", "error")

_NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UtcDateTime(TypeDecorator[datetime]):
    """A timestamp that is always timezone-aware UTC in Python.

    Naive datetimes are rejected on the way in (they are a bug, not a convention). SQLite keeps
    no offset, so values are normalised to UTC before storage and tagged UTC on the way out.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: Drupe stores timezone-aware UTC only")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class JsonValue(TypeDecorator[Any]):
    """A JSON document: ``JSON`` on SQLite, ``JSONB`` on PostgreSQL.

    Python ``None`` is stored as SQL ``NULL`` (not the JSON text ``null``), so ``IS NULL`` works.
    """

    impl = JSON(none_as_null=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(JSONB(none_as_null=True))
        return dialect.type_descriptor(JSON(none_as_null=True))


class Base(DeclarativeBase):
    """Declarative base holding Drupe's metadata (with deterministic constraint names)."""

    metadata = MetaData(naming_convention=_NAMING)


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


class UserRow(Base):
    """A person who signs in; only the argon2 hash of the password is stored."""

    __tablename__ = "users"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    email: Mapped[str | None] = mapped_column(String(320))
    role: Mapped[str] = mapped_column(String(16))
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)
    password_hash: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)

    __table_args__ = (CheckConstraint("role IN ('admin', 'member')", name="role"),)


class UserTokenRow(Base):
    """A personal API token of a user; only its SHA-256 is stored."""

    __tablename__ = "user_tokens"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(Text)
    prefix: Mapped[str] = mapped_column(String(32))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    last_used_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


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


class ScheduleRow(Base):
    """A scheduled agent task: an agent, a prompt, a trigger and its options (``tasks/``)."""

    __tablename__ = "schedules"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    agent_id: Mapped[str] = mapped_column(
        String(255), ForeignKey("agents.id", ondelete="CASCADE"), index=True
    )
    kind: Mapped[str] = mapped_column(String(16))
    prompt: Mapped[str] = mapped_column(Text)
    trigger: Mapped[dict[str, Any]] = mapped_column(JsonValue)
    timeout_minutes: Mapped[int] = mapped_column(Integer)
    session_mode: Mapped[str] = mapped_column(String(16))
    sticky_session_id: Mapped[str | None] = mapped_column(String(255))
    owner_id: Mapped[str | None] = mapped_column(String(64), index=True)
    """The user it belongs to (None: an admin's, from before identity)."""
    deliver_to: Mapped[list[dict[str, Any]]] = mapped_column(JsonValue, default=list)
    missed_policy: Mapped[str] = mapped_column(String(16))
    enabled: Mapped[bool] = mapped_column(Boolean)
    next_run_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    last_run_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)

    __table_args__ = (
        CheckConstraint("kind IN ('task', 'heartbeat')", name="kind"),
        CheckConstraint("session_mode IN ('fresh', 'sticky')", name="session_mode"),
        CheckConstraint("missed_policy IN ('skip', 'run-once')", name="missed_policy"),
        Index(None, "enabled", "next_run_at"),
    )


class TaskRunRow(Base):
    """One run of an agent task: a schedule's fire, a run-now, a heartbeat or a background run."""

    __tablename__ = "task_runs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    schedule_id: Mapped[str | None] = mapped_column(
        String(64), ForeignKey("schedules.id", ondelete="SET NULL"), index=True
    )
    kind: Mapped[str] = mapped_column(String(16))
    agent_id: Mapped[str | None] = mapped_column(String(255))
    session_id: Mapped[str | None] = mapped_column(String(255))
    conversation_id: Mapped[str | None] = mapped_column(String(255), index=True)
    message_id: Mapped[str | None] = mapped_column(String(255))
    scheduled_for: Mapped[datetime | None] = mapped_column(UtcDateTime)
    started_at: Mapped[datetime] = mapped_column(UtcDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    status: Mapped[str] = mapped_column(String(16))
    result: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    duration_ms: Mapped[int | None] = mapped_column(Integer)
    node_id: Mapped[str | None] = mapped_column(String(255))
    """The cluster node running it (None: a single-process server)."""
    task_id: Mapped[str | None] = mapped_column(String(64), index=True)
    """The schedule it ran for, kept when the schedule is deleted (``schedule_id`` is not)."""
    owner_id: Mapped[str | None] = mapped_column(String(64), index=True)
    """The user it belongs to (None: an admin's, from before identity)."""

    __table_args__ = (
        CheckConstraint(
            "kind IN ('scheduled', 'manual', 'heartbeat', 'background', 'chat')", name="kind"
        ),
        CheckConstraint(
            "status IN ('running', 'completed', 'failed', 'skipped', 'cancelled')", name="status"
        ),
        Index(None, "schedule_id", "scheduled_for", unique=True),
        Index(None, "started_at"),
    )


class ChannelBindingRow(Base):
    """The conversation (or agent session) one chat of one IM channel is bound to."""

    __tablename__ = "channel_bindings"

    channel_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    chat_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    conversation_id: Mapped[str] = mapped_column(String(255))
    """``conv_...`` for a model target, ``agent-session:<id>`` for an agent target."""
    target: Mapped[str] = mapped_column(String(255))
    """The channel's target when the binding was made (``model:<id>`` / ``agent:<id>``)."""
    owner_id: Mapped[str | None] = mapped_column(String(64), index=True)
    """The user it belongs to (None: an admin's, from before identity)."""
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class ChannelDeliveryRow(Base):
    """One answer delivered to one chat: its platform message and its terminal state."""

    __tablename__ = "channel_deliveries"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    channel_id: Mapped[str] = mapped_column(String(255))
    chat_id: Mapped[str] = mapped_column(String(255))
    anchor_message_id: Mapped[str | None] = mapped_column(String(255))
    platform_message_id: Mapped[str | None] = mapped_column(String(255))
    state: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)

    __table_args__ = (
        CheckConstraint("state IN ('live', 'terminal', 'delivered')", name="state"),
        Index(None, "channel_id", "state"),
    )


class AuthSessionRow(Base):
    """A signed-in browser session; only the SHA-256 of its cookie value is stored."""

    __tablename__ = "auth_sessions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    method: Mapped[str] = mapped_column(String(16))
    """How the user signed in: ``password``, ``link``, ``oidc`` or ``header``."""


class SignInLinkRow(Base):
    """A one-time sign-in link (the first run's URL); only its SHA-256 is stored."""

    __tablename__ = "sign_in_links"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(64), ForeignKey("users.id", ondelete="CASCADE"))
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    used_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class ShareRow(Base):
    """One resource (a conversation or an agent) shared with one user, to read or to write."""

    __tablename__ = "shares"

    resource_kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    resource_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    user_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("users.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    access: Mapped[str] = mapped_column(String(8))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)

    __table_args__ = (
        CheckConstraint("resource_kind IN ('conversation', 'agent')", name="resource_kind"),
        CheckConstraint("access IN ('read', 'write')", name="access"),
    )


class AuditRow(Base):
    """One security-relevant event: who did what to what, from where. Never a secret."""

    __tablename__ = "audit_log"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)
    actor_id: Mapped[str | None] = mapped_column(String(64))
    actor_name: Mapped[str | None] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(64))
    target: Mapped[str | None] = mapped_column(Text)
    address: Mapped[str | None] = mapped_column(String(64))
    detail: Mapped[dict[str, Any]] = mapped_column(JsonValue, default=dict)


class UserIdentityRow(Base):
    """A user's account at an OpenID provider: ``(issuer, subject)`` names one person there."""

    __tablename__ = "user_identities"

    issuer: Mapped[str] = mapped_column(String(255), primary_key=True)
    subject: Mapped[str] = mapped_column(String(255), primary_key=True)
    user_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class OidcLoginRow(Base):
    """A sign-in started at an OpenID provider and not finished yet: what the callback checks
    (the nonce) and proves (the PKCE verifier). Keyed by the SHA-256 of its ``state``."""

    __tablename__ = "oidc_logins"

    state_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    nonce: Mapped[str] = mapped_column(String(128))
    code_verifier: Mapped[str] = mapped_column(String(128))
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)
