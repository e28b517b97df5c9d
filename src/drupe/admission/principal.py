"""``Principal``: who makes a call into the runtime.

Contract: every call through the ``Conversations`` port carries its caller. Until identity
lands, every surface passes ``LOCAL_ADMIN`` (the one local user of a loopback server); the
identity layer resolves a request (session cookie, bearer token, gateway key) to a principal
and the port's ``AccessPolicy`` decides what it may see and do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["LOCAL_ADMIN", "Principal", "Role"]

Role = Literal["admin", "member"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    user_id: str
    name: str
    role: Role = "member"
    scopes: frozenset[str] | None = None
    """What a token may do (None: everything its user may do)."""

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


LOCAL_ADMIN: Final = Principal(user_id="local", name="local", role="admin")
"""The caller of a server without identity (loopback, one person)."""
