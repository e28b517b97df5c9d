"""The identity tables: users, their tokens, sign-in sessions and links, OpenID accounts and
logins, shares and the audit log (typed SQLAlchemy 2 ORM classes on ``columns.Base``).

Re-exported by ``persistence.tables``, which is where the whole schema is imported from (the
Alembic env and the stores). Secrets are never stored, only their SHA-256 or argon2 hash.
Issues no SQL: only the stores do.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, CheckConstraint, ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from drupe.persistence.columns import Base, JsonValue, UtcDateTime

__all__ = [
    "AuditRow",
    "AuthSessionRow",
    "ChatLinkCodeRow",
    "OidcLoginRow",
    "ShareRow",
    "SignInLinkRow",
    "UserIdentityRow",
    "UserRow",
    "UserTokenRow",
]


class UserRow(Base):
    """A person who signs in; only the argon2 hash of the password is stored."""

    __tablename__ = "users"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    email: Mapped[str | None] = mapped_column(String(320))
    role: Mapped[str] = mapped_column(String(16))
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)
    password_hash: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)

    __table_args__ = (CheckConstraint("role IN ('admin', 'member')", name="role"),)


class UserTokenRow(Base):
    """A personal API token of a user; only its SHA-256 is stored."""

    __tablename__ = "user_tokens"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(Text)
    prefix: Mapped[str] = mapped_column(String(32))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    last_used_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class AuthSessionRow(Base):
    """A signed-in browser session; only the SHA-256 of its cookie value is stored."""

    __tablename__ = "auth_sessions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    method: Mapped[str] = mapped_column(String(16))
    """How the user signed in: ``password``, ``link``, ``oidc`` or ``header``."""
    id_token: Mapped[str | None] = mapped_column(Text)
    """An OIDC sign-in's ID token, sealed (the logout's ``id_token_hint``); else None."""


class SignInLinkRow(Base):
    """A one-time sign-in link (the first run's URL); only its SHA-256 is stored."""

    __tablename__ = "sign_in_links"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(64), ForeignKey("users.id", ondelete="CASCADE"))
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    used_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class ChatLinkCodeRow(Base):
    """A one-time code that links the IM account that sends it (``/link <code>``) to the user
    who made it; only its SHA-256 is stored. A user has at most one."""

    __tablename__ = "chat_link_codes"

    code_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)


class ShareRow(Base):
    """One resource (a conversation or an agent) shared with one user, to read or to write."""

    __tablename__ = "shares"

    resource_kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    resource_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    user_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("users.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    access: Mapped[str] = mapped_column(String(8))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)

    __table_args__ = (
        CheckConstraint("resource_kind IN ('conversation', 'agent')", name="resource_kind"),
        CheckConstraint("access IN ('read', 'write')", name="access"),
    )


class AuditRow(Base):
    """One security-relevant event: who did what to what, from where. Never a secret."""

    __tablename__ = "audit_log"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)
    actor_id: Mapped[str | None] = mapped_column(String(64))
    actor_name: Mapped[str | None] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(64))
    target: Mapped[str | None] = mapped_column(Text)
    address: Mapped[str | None] = mapped_column(String(64))
    detail: Mapped[dict[str, Any]] = mapped_column(JsonValue, default=dict)


class UserIdentityRow(Base):
    """A user's account at an OpenID provider: ``(issuer, subject)`` names one person there."""

    __tablename__ = "user_identities"

    issuer: Mapped[str] = mapped_column(String(255), primary_key=True)
    subject: Mapped[str] = mapped_column(String(255), primary_key=True)
    user_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class OidcLoginRow(Base):
    """A sign-in started at an OpenID provider and not finished yet: what the callback checks
    (the nonce) and proves (the PKCE verifier). Keyed by the SHA-256 of its ``state``."""

    __tablename__ = "oidc_logins"

    state_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    nonce: Mapped[str] = mapped_column(String(128))
    code_verifier: Mapped[str] = mapped_column(String(128))
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)
