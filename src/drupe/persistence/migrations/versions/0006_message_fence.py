"""Cluster fencing: ``messages.fence``, the token of the owner that last wrote the row.

NULL means never fenced (single-node writes). A fenced write only changes a row whose fence is
NULL or not above its own token (``drupe.persistence.messages``).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("fence", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    # A plain ALTER TABLE ... DROP COLUMN (SQLite >= 3.35): a batch "move and copy" would drop
    # the old ``messages`` table, and with foreign keys on, its self-referencing ON DELETE
    # CASCADE would delete the copied answers of every user row.
    op.drop_column("messages", "fence")
