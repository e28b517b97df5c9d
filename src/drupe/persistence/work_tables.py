"""The task and channel tables: schedules, task runs, IM chat bindings and channel deliveries
(typed SQLAlchemy 2 ORM classes on ``columns.Base``).

Re-exported by ``persistence.tables``, which is where the whole schema is imported from (the
Alembic env and the stores). Issues no SQL: only the stores do.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, CheckConstraint, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from drupe.persistence.columns import Base, JsonValue, UtcDateTime

__all__ = ["ChannelBindingRow", "ChannelDeliveryRow", "ScheduleRow", "TaskRunRow"]


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
