"""task_runs.task_id: the task a run belongs to, kept when the task is deleted.

``schedule_id`` is a foreign key that becomes NULL when its schedule is deleted; ``task_id``
keeps the id, so a deleted task's run history stays readable (``drupe task runs``,
``GET /api/schedules/{id}/runs``). Existing rows get their ``schedule_id``.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("task_runs") as batch:
        batch.add_column(sa.Column("task_id", sa.String(64), nullable=True))
        batch.create_index("ix_task_runs_task_id", ["task_id"])
    op.execute("UPDATE task_runs SET task_id = schedule_id WHERE schedule_id IS NOT NULL")


def downgrade() -> None:
    with op.batch_alter_table("task_runs") as batch:
        batch.drop_index("ix_task_runs_task_id")
        batch.drop_column("task_id")
