"""Identity, step 2: sign-in sessions, one-time sign-in links, shares, the audit log, and an
owner on every resource (issue 20).

Every existing row gets an owner: the first admin when one exists already; otherwise the rows
stay unowned (NULL, which only admins see) until the first admin is created, which adopts
them (``persistence.owners.adopt_unowned``). No row is lost or hidden from an admin.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TIMESTAMP = sa.DateTime(timezone=True)
_JSON = sa.JSON().with_variant(JSONB(), "postgresql")
OWNED_TABLES = (
    "conversations",
    "api_keys",
    "gateway_responses",
    "agents",
    "agent_sessions",
    "schedules",
    "task_runs",
    "channel_bindings",
)


def upgrade() -> None:
    # Plain ALTER TABLE on both dialects (SQLite adds and drops a column in place since 3.35).
    for table in OWNED_TABLES:
        op.add_column(table, sa.Column("owner_id", sa.String(64), nullable=True))
        op.create_index(f"ix_{table}_owner_id", table, ["owner_id"])
    bind = op.get_bind()
    first_admin = bind.execute(
        sa.text("SELECT id FROM users WHERE role = 'admin' ORDER BY created_at, id LIMIT 1")
    ).scalar()
    if first_admin is not None:
        for table in OWNED_TABLES:
            bind.execute(
                sa.text(f"UPDATE {table} SET owner_id = :owner WHERE owner_id IS NULL"),
                {"owner": first_admin},
            )
    op.create_table(
        "auth_sessions",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column("csrf_token", sa.String(64), nullable=False),
        sa.Column("created_at", _TIMESTAMP, nullable=False),
        sa.Column("expires_at", _TIMESTAMP, nullable=False),
        sa.Column("revoked_at", _TIMESTAMP, nullable=True),
        sa.Column("method", sa.String(16), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name="fk_auth_sessions_user_id_users", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_auth_sessions"),
        sa.UniqueConstraint("token_hash", name="uq_auth_sessions_token_hash"),
    )
    op.create_index("ix_auth_sessions_user_id", "auth_sessions", ["user_id"])
    op.create_table(
        "sign_in_links",
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column("expires_at", _TIMESTAMP, nullable=False),
        sa.Column("used_at", _TIMESTAMP, nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name="fk_sign_in_links_user_id_users", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("token_hash", name="pk_sign_in_links"),
    )
    op.create_table(
        "shares",
        sa.Column("resource_kind", sa.String(16), nullable=False),
        sa.Column("resource_id", sa.String(255), nullable=False),
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column("access", sa.String(8), nullable=False),
        sa.Column("created_at", _TIMESTAMP, nullable=False),
        sa.CheckConstraint(
            "resource_kind IN ('conversation', 'agent')", name="ck_shares_resource_kind"
        ),
        sa.CheckConstraint("access IN ('read', 'write')", name="ck_shares_access"),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name="fk_shares_user_id_users", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("resource_kind", "resource_id", "user_id", name="pk_shares"),
    )
    op.create_index("ix_shares_user_id", "shares", ["user_id"])
    op.create_table(
        "audit_log",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("at", _TIMESTAMP, nullable=False),
        sa.Column("actor_id", sa.String(64), nullable=True),
        sa.Column("actor_name", sa.String(64), nullable=True),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("target", sa.Text(), nullable=True),
        sa.Column("address", sa.String(64), nullable=True),
        sa.Column("detail", _JSON, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit_log"),
    )
    op.create_index("ix_audit_log_at", "audit_log", ["at"])


def downgrade() -> None:
    op.drop_index("ix_audit_log_at", table_name="audit_log")
    op.drop_table("audit_log")
    op.drop_index("ix_shares_user_id", table_name="shares")
    op.drop_table("shares")
    op.drop_table("sign_in_links")
    op.drop_index("ix_auth_sessions_user_id", table_name="auth_sessions")
    op.drop_table("auth_sessions")
    for table in reversed(OWNED_TABLES):
        op.drop_index(f"ix_{table}_owner_id", table_name=table)
        op.drop_column(table, "owner_id")
