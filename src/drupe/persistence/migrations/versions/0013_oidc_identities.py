"""Identity, step 4: single sign-on. A user's accounts at OpenID providers
(``user_identities``: issuer + subject -> user) and the sign-ins started at a provider and not
finished yet (``oidc_logins``: the nonce and PKCE verifier of a ``state``, so any cluster node
can finish what another started).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "user_identities",
        sa.Column("issuer", sa.String(255), nullable=False),
        sa.Column("subject", sa.String(255), nullable=False),
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column("created_at", _TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name="fk_user_identities_user_id_users", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("issuer", "subject", name="pk_user_identities"),
    )
    op.create_index("ix_user_identities_user_id", "user_identities", ["user_id"])
    op.create_table(
        "oidc_logins",
        sa.Column("state_hash", sa.String(64), nullable=False),
        sa.Column("nonce", sa.String(128), nullable=False),
        sa.Column("code_verifier", sa.String(128), nullable=False),
        sa.Column("expires_at", _TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("state_hash", name="pk_oidc_logins"),
    )
    op.create_index("ix_oidc_logins_expires_at", "oidc_logins", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_oidc_logins_expires_at", table_name="oidc_logins")
    op.drop_table("oidc_logins")
    op.drop_index("ix_user_identities_user_id", table_name="user_identities")
    op.drop_table("user_identities")
