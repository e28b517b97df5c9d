"""IM channels: chat bindings and the delivery ledger.

``channel_bindings`` maps (channel, chat) to its conversation or agent session;
``channel_deliveries`` records each answer's platform message and whether its terminal text was
claimed (``terminal``) or delivered, so a restart never sends a final message twice.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "channel_bindings",
        sa.Column("channel_id", sa.String(255), nullable=False),
        sa.Column("chat_id", sa.String(255), nullable=False),
        sa.Column("conversation_id", sa.String(255), nullable=False),
        sa.Column("target", sa.String(255), nullable=False),
        sa.Column("created_at", _TIMESTAMP, nullable=False),
        sa.Column("updated_at", _TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("channel_id", "chat_id", name="pk_channel_bindings"),
    )
    op.create_table(
        "channel_deliveries",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("channel_id", sa.String(255), nullable=False),
        sa.Column("chat_id", sa.String(255), nullable=False),
        sa.Column("anchor_message_id", sa.String(255), nullable=True),
        sa.Column("platform_message_id", sa.String(255), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_at", _TIMESTAMP, nullable=False),
        sa.Column("updated_at", _TIMESTAMP, nullable=False),
        sa.CheckConstraint(
            "state IN ('live', 'terminal', 'delivered')", name="ck_channel_deliveries_state"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_channel_deliveries"),
    )
    op.create_index(
        "ix_channel_deliveries_channel_id_state", "channel_deliveries", ["channel_id", "state"]
    )


def downgrade() -> None:
    op.drop_table("channel_deliveries")
    op.drop_table("channel_bindings")
