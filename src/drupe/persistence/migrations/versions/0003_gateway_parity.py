"""Gateway parity: per-key scopes and budgets, stored Responses-API responses.

``api_keys`` gains ``allowed_models``, ``allowed_agents`` (JSON arrays, NULL = any),
``requests_per_minute`` and ``tokens_per_day`` (NULL = unlimited). ``gateway_responses`` holds
the responses created with ``store: true``, by the key (``key_id``) that created them.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(JSONB(), "postgresql")
_TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("allowed_models", _JSON, nullable=True))
        batch.add_column(sa.Column("allowed_agents", _JSON, nullable=True))
        batch.add_column(sa.Column("requests_per_minute", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("tokens_per_day", sa.Integer(), nullable=True))
    op.create_table(
        "gateway_responses",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("key_id", sa.String(64), nullable=True),
        sa.Column("model", sa.String(255), nullable=False),
        sa.Column("created_at", _TIMESTAMP, nullable=False),
        sa.Column("input_items", _JSON, nullable=False),
        sa.Column("body", _JSON, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_gateway_responses"),
    )
    op.create_index("ix_gateway_responses_key_id", "gateway_responses", ["key_id"])


def downgrade() -> None:
    op.drop_table("gateway_responses")
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("tokens_per_day")
        batch.drop_column("requests_per_minute")
        batch.drop_column("allowed_agents")
        batch.drop_column("allowed_models")
