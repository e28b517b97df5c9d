"""Agent tasks: schedules, task_runs (run history), agent_sessions.trace_id.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(JSONB(), "postgresql")
_TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.add_column("agent_sessions", sa.Column("trace_id", sa.String(64), nullable=True))
    op.create_table(
        "schedules",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("agent_id", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("trigger", _JSON, nullable=False),
        sa.Column("timeout_minutes", sa.Integer(), nullable=False),
        sa.Column("session_mode", sa.String(16), nullable=False),
        sa.Column("sticky_session_id", sa.String(255), nullable=True),
        sa.Column("deliver_to", _JSON, nullable=False),
        sa.Column("missed_policy", sa.String(16), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("next_run_at", _TIMESTAMP, nullable=True),
        sa.Column("last_run_at", _TIMESTAMP, nullable=True),
        sa.Column("created_at", _TIMESTAMP, nullable=False),
        sa.Column("updated_at", _TIMESTAMP, nullable=False),
        sa.CheckConstraint("kind IN ('task', 'heartbeat')", name="ck_schedules_kind"),
        sa.CheckConstraint("session_mode IN ('fresh', 'sticky')", name="ck_schedules_session_mode"),
        sa.CheckConstraint(
            "missed_policy IN ('skip', 'run-once')", name="ck_schedules_missed_policy"
        ),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name="fk_schedules_agent_id_agents", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_schedules"),
    )
    op.create_index("ix_schedules_agent_id", "schedules", ["agent_id"])
    op.create_index("ix_schedules_enabled_next_run_at", "schedules", ["enabled", "next_run_at"])
    op.create_table(
        "task_runs",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("schedule_id", sa.String(64), nullable=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("agent_id", sa.String(255), nullable=True),
        sa.Column("session_id", sa.String(255), nullable=True),
        sa.Column("conversation_id", sa.String(255), nullable=True),
        sa.Column("message_id", sa.String(255), nullable=True),
        sa.Column("scheduled_for", _TIMESTAMP, nullable=True),
        sa.Column("started_at", _TIMESTAMP, nullable=False),
        sa.Column("finished_at", _TIMESTAMP, nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("duration_ms", sa.Integer(), nullable=True),
        sa.CheckConstraint(
            "kind IN ('scheduled', 'manual', 'heartbeat', 'background', 'chat')",
            name="ck_task_runs_kind",
        ),
        sa.CheckConstraint(
            "status IN ('running', 'completed', 'failed', 'skipped', 'cancelled')",
            name="ck_task_runs_status",
        ),
        sa.ForeignKeyConstraint(
            ["schedule_id"],
            ["schedules.id"],
            name="fk_task_runs_schedule_id_schedules",
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_task_runs"),
    )
    op.create_index("ix_task_runs_schedule_id", "task_runs", ["schedule_id"])
    op.create_index("ix_task_runs_conversation_id", "task_runs", ["conversation_id"])
    op.create_index("ix_task_runs_started_at", "task_runs", ["started_at"])
    op.create_index(
        "ix_task_runs_schedule_id_scheduled_for",
        "task_runs",
        ["schedule_id", "scheduled_for"],
        unique=True,
    )


def downgrade() -> None:
    op.drop_table("task_runs")
    op.drop_table("schedules")
    with op.batch_alter_table("agent_sessions") as batch:
        batch.drop_column("trace_id")
