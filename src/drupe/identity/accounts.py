"""The Drupe user behind an outside sign-in: an OpenID provider account, a proxy's header.

Contract:

* ``user_for_oidc(db, person, sync_role)``: the user linked to the provider account
  ``(issuer, subject)``; when there is none, a new user is created (no password; the name from
  the claims, made unique with ``-2``, ``-3``, ...: an SSO account never takes over an existing
  local user of the same name) with the claims' role, and linked. With ``sync_role`` (a
  ``role_claim`` is configured) an existing user's role follows the claim at each sign-in.
  A disabled user is refused (``OidcRefused``). Creations and role changes are audited.
* ``user_for_header(db, value)``: the user a trusted proxy names (the value made a safe user
  name); created as a member when missing. None when that user is disabled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from drupe.admission.principal import Role
from drupe.errors import ValidationError
from drupe.identity.oidc_claims import OidcPerson, OidcRefused, candidate_names, safe_name
from drupe.persistence.users import UserRecord

if TYPE_CHECKING:
    from drupe.persistence.db import Database

__all__ = ["user_for_header", "user_for_oidc"]

NAME_TRIES: Final = 50
MAX_HEADER_CHARS: Final = 320


async def _create(
    db: Database, name: str, *, role: Role, email: str | None, via: str
) -> UserRecord | None:
    try:
        user = await db.users.create(name, password=None, role=role, email=email)
    except ValidationError:
        return None  # the name is taken (maybe just now, by a concurrent sign-in)
    await db.audit.record(
        "user.create", actor_name=via, target=user.name, detail={"role": role, "via": via}
    )
    return user


async def user_for_oidc(db: Database, person: OidcPerson, *, sync_role: bool) -> UserRecord:
    user = await db.identities.find(person.issuer, person.subject)
    if user is None:
        for name in candidate_names(person.name, NAME_TRIES):
            if await db.users.get_by_name(name) is not None:
                continue
            user = await _create(db, name, role=person.role, email=person.email, via="oidc")
            if user is not None:
                break
        if user is None:
            raise OidcRefused(
                f"no free user name near {person.name!r}: ask an admin to rename an account"
            )
        await db.identities.link(person.issuer, person.subject, user.id)
        linked = await db.identities.find(person.issuer, person.subject)
        user = linked if linked is not None else user  # a concurrent first sign-in won
    if user.disabled:
        raise OidcRefused(f"the account {user.name!r} is disabled: ask an admin")
    if sync_role and user.role != person.role:
        user = await db.users.set_role(user.name, person.role)
        await db.audit.record(
            "user.role",
            actor_name="oidc",
            target=user.name,
            detail={"role": person.role, "via": "oidc"},
        )
    return user


async def user_for_header(db: Database, value: str) -> UserRecord | None:
    value = value.strip()
    if not value or len(value) > MAX_HEADER_CHARS:
        return None
    name = safe_name(value)
    user = await db.users.get_by_name(name)
    if user is None:
        email = value if "@" in value else None
        user = await _create(db, name, role="member", email=email, via="header")
        if user is None:
            user = await db.users.get_by_name(name)
    if user is None or user.disabled:
        return None
    return user
