"""task_runs.node_id: the cluster node that runs a task run (boot fails only its own runs).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("task_runs") as batch:
        batch.add_column(sa.Column("node_id", sa.String(255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("task_runs") as batch:
        batch.drop_column("node_id")
