"""IM accounts linked by their users: the one-time codes a signed-in user makes and sends to a
channel's bot (``/link <code>``); the links themselves are ``user_identities`` rows with the
issuer ``channel:<channel id>``.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "chat_link_codes",
        sa.Column("code_hash", sa.String(64), nullable=False),
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column("expires_at", _TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name="fk_chat_link_codes_user_id_users", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("code_hash", name="pk_chat_link_codes"),
    )
    op.create_index("ix_chat_link_codes_user_id", "chat_link_codes", ["user_id"])


def downgrade() -> None:
    op.drop_index("ix_chat_link_codes_user_id", table_name="chat_link_codes")
    op.drop_table("chat_link_codes")
