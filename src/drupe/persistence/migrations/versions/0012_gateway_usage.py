"""gateway_usage: gateway requests and tokens per UTC day, key, user, model and dialect
(issue 23, item 12).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "gateway_usage",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("key_id", sa.String(64), nullable=True),
        sa.Column("owner_id", sa.String(255), nullable=True),
        sa.Column("model", sa.String(255), nullable=False),
        sa.Column("dialect", sa.String(32), nullable=False),
        sa.Column("requests", sa.BigInteger(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_gateway_usage"),
    )
    op.create_index("ix_gateway_usage_day", "gateway_usage", ["day"])
    op.create_index("ix_gateway_usage_key_id", "gateway_usage", ["key_id"])
    op.create_index("ix_gateway_usage_owner_id", "gateway_usage", ["owner_id"])


def downgrade() -> None:
    op.drop_index("ix_gateway_usage_owner_id", table_name="gateway_usage")
    op.drop_index("ix_gateway_usage_key_id", table_name="gateway_usage")
    op.drop_index("ix_gateway_usage_day", table_name="gateway_usage")
    op.drop_table("gateway_usage")
