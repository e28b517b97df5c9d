"""The zero-config first run: a loopback server with no users makes a local admin and prints a
one-time sign-in URL (as Jupyter does).

Contract: ``sign_in_link(settings)`` opens the database (migrating it) and, when auth is on,
the bind is loopback, and there is no user yet, creates the admin ``admin`` (no password: it
signs in by link, and can set one with ``drupe users``), gives it every row from before
identity, and returns a one-time link path (``/api/auth/link?token=...``). On later starts,
while that local admin still has no password, it returns a fresh link again, so
``scripts/serve`` always opens straight into the UI. Otherwise None. A non-loopback bind with
no user is refused (``ConfigError`` naming the fix): nobody could sign in.
"""

from __future__ import annotations

from drupe.errors import ConfigError
from drupe.persistence.db import open_database
from drupe.persistence.owners import adopt_unowned
from drupe.settings import Settings, is_loopback

__all__ = ["LOCAL_ADMIN_NAME", "sign_in_link"]

LOCAL_ADMIN_NAME = "admin"


async def sign_in_link(settings: Settings) -> str | None:
    if not settings.auth.enabled:
        return None
    async with open_database(settings.database_url, data_dir=settings.data_dir) as db:
        users = await db.users.list_users()
        if not users:
            if not is_loopback(settings.host):
                raise ConfigError(
                    f"--host {settings.host} with auth on needs a user to sign in: create an "
                    "admin first with `drupe users create NAME --admin --password-stdin`"
                )
            admin = await db.users.create(LOCAL_ADMIN_NAME, password=None, role="admin")
            await adopt_unowned(db.transactions, admin.id)
            await db.audit.record(
                "user.create", actor_name="drupe serve", target=admin.name, detail={"role": "admin"}
            )
        else:
            first = next((u for u in users if u.name == LOCAL_ADMIN_NAME), None)
            if first is None or first.has_password or first.disabled:
                return None
            if not is_loopback(settings.host):
                return None
            admin = first
        token = await db.auth_sessions.create_link(admin.id, ttl=settings.auth.link_minutes * 60)
    return f"/api/auth/link?token={token}"
