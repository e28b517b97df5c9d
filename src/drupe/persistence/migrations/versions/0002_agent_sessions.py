"""Agent sessions: agents, agent_sessions, and messages.runtime_resume_token.

A session's messages reuse ``messages`` under the conversation ``agent-session:<sessionId>``.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(JSONB(), "postgresql")
_TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "agents",
        sa.Column("id", sa.String(255), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("driver_type", sa.String(64), nullable=False),
        sa.Column("model_id", sa.String(255), nullable=True),
        sa.Column("instructions", sa.Text(), nullable=True),
        sa.Column("workspace", sa.Text(), nullable=True),
        sa.Column("tools", _JSON, nullable=False),
        sa.Column("mcp_servers", _JSON, nullable=False),
        sa.Column("permission_mode", sa.String(32), nullable=False),
        sa.Column("created_at", _TIMESTAMP, nullable=False),
        sa.Column("updated_at", _TIMESTAMP, nullable=False),
        sa.CheckConstraint(
            "permission_mode IN ('default', 'accept-edits', 'plan', 'bypass')",
            name="ck_agents_permission_mode",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_agents"),
    )
    op.create_table(
        "agent_sessions",
        sa.Column("id", sa.String(255), nullable=False),
        sa.Column("agent_id", sa.String(255), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("created_at", _TIMESTAMP, nullable=False),
        sa.Column("updated_at", _TIMESTAMP, nullable=False),
        sa.Column("last_resume_token", sa.Text(), nullable=True),
        sa.Column("settings", _JSON, nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name="fk_agent_sessions_agent_id_agents",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_agent_sessions"),
    )
    op.create_index("ix_agent_sessions_agent_id", "agent_sessions", ["agent_id"])
    op.add_column("messages", sa.Column("runtime_resume_token", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("runtime_resume_token")
    op.drop_table("agent_sessions")
    op.drop_table("agents")
