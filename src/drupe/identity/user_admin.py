"""User administration and sharing, for the admin API and ``drupe users`` alike (issue 20).

Contract (every change is audited with its actor, target and address; never a secret):

* ``create_user``: a new user (``user.create``). The first enabled admin created adopts every
  row from before identity (``persistence.owners.adopt_unowned``).
* ``change_user``: a new role and/or the disabled flag (``user.role``, ``user.disable``,
  ``user.enable``); refuses to leave no enabled admin (``UserStore.change``). Disabling ends
  every session of the user in the database at once; the caller also drops its node's cached
  sign-ins of the user (``Authenticator.forget_user``).
* ``shares_of``, ``share``, ``unshare``: a conversation's or an agent's shares. Only the
  resource's owner or an admin may see or change them; for anyone else the resource answers
  ``NotFoundError`` (404), exactly like a missing one (``share.set``, ``share.remove``).
* A share's audit row names the user by id (a name could look like a secret to
  ``AuditLog.record``: ``sk-...`` is a valid user name).
* ``Actor``: who acts; ``CLI_ACTOR`` is the operator at the command line (an admin).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from drupe.admission.principal import Principal
from drupe.errors import NotFoundError, ValidationError
from drupe.persistence.owners import adopt_unowned
from drupe.persistence.shares import SHARE_ACCESS, SHARE_KINDS, Share, ShareAccess, ShareKind

if TYPE_CHECKING:
    from drupe.persistence.db import Database
    from drupe.persistence.records import AgentRecord, ConversationRecord
    from drupe.persistence.users import Role, UserRecord

__all__ = [
    "CLI_ACTOR",
    "Actor",
    "NamedShare",
    "change_user",
    "create_user",
    "share",
    "shares_of",
    "unshare",
]

_ID_MAX: Final = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class Actor:
    id: str | None
    name: str
    is_admin: bool
    address: str | None = None

    @classmethod
    def of(cls, principal: Principal, address: str | None) -> Actor:
        return cls(
            id=principal.user_id, name=principal.name, is_admin=principal.is_admin, address=address
        )


CLI_ACTOR: Final = Actor(id=None, name="cli", is_admin=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class NamedShare:
    user_id: str
    name: str
    access: ShareAccess


async def _audit(
    db: Database, actor: Actor, action: str, target: str, detail: dict[str, object]
) -> None:
    await db.audit.record(
        action,
        actor_id=actor.id,
        actor_name=actor.name,
        target=target,
        address=actor.address,
        detail=detail,
    )


async def create_user(
    db: Database,
    actor: Actor,
    name: str,
    *,
    password: str | None,
    role: Role = "member",
    email: str | None = None,
) -> UserRecord:
    had_admin = await db.users.first_admin() is not None
    user = await db.users.create(name, password=password, role=role, email=email)
    detail: dict[str, object] = {"role": user.role}
    if user.role == "admin" and not had_admin:
        detail["adopted"] = await adopt_unowned(db.transactions, user.id)
    await _audit(db, actor, "user.create", user.name, detail)
    return user


async def change_user(
    db: Database,
    actor: Actor,
    name: str,
    *,
    role: Role | None = None,
    disabled: bool | None = None,
) -> UserRecord:
    before, after = await db.users.change(name, role=role, disabled=disabled)
    if after.role != before.role:
        await _audit(db, actor, "user.role", after.name, {"from": before.role, "to": after.role})
    if after.disabled and not before.disabled:
        ended = await db.auth_sessions.revoke_user(after.id)
        await _audit(db, actor, "user.disable", after.name, {"sessionsEnded": ended})
    elif before.disabled and not after.disabled:
        await _audit(db, actor, "user.enable", after.name, {})
    return after


def _kind(kind: str) -> ShareKind:
    if kind not in SHARE_KINDS:
        raise ValidationError(f"only a {' or an '.join(SHARE_KINDS)} can be shared, not {kind!r}")
    return "agent" if kind == "agent" else "conversation"


async def _owned(db: Database, actor: Actor, kind: ShareKind, resource_id: str) -> str | None:
    """The resource's owner, if ``actor`` may manage its shares; else ``NotFoundError``."""
    record: ConversationRecord | AgentRecord | None = None
    if len(resource_id) <= _ID_MAX:
        if kind == "conversation":
            record = await db.conversations.get(resource_id)
        else:
            record = await db.agents.get_agent(resource_id)
    owner = record.owner_id if record is not None else None
    if record is None or not (actor.is_admin or (owner is not None and owner == actor.id)):
        raise NotFoundError(kind, resource_id)
    return owner


async def shares_of(db: Database, actor: Actor, kind: str, resource_id: str) -> list[NamedShare]:
    checked = _kind(kind)
    await _owned(db, actor, checked, resource_id)
    names = {user.id: user.name for user in await db.users.list_users()}
    return [
        NamedShare(user_id=s.user_id, name=names.get(s.user_id, s.user_id), access=s.access)
        for s in await db.shares.shared_with(checked, resource_id)
    ]


async def share(
    db: Database, actor: Actor, kind: str, resource_id: str, user_name: str, access: str
) -> Share:
    checked = _kind(kind)
    if access not in SHARE_ACCESS:
        raise ValidationError(f"access must be one of {', '.join(SHARE_ACCESS)}, not {access!r}")
    owner = await _owned(db, actor, checked, resource_id)
    user = await db.users.get_by_name(user_name)
    if user is None:
        raise NotFoundError("user", user_name)
    if user.id == owner:
        raise ValidationError(f"{user_name!r} owns this {checked}: there is nothing to share")
    given = await db.shares.share(
        checked, resource_id, user.id, "write" if access == "write" else "read"
    )
    await _audit(
        db,
        actor,
        "share.set",
        f"{checked}:{resource_id}",
        {"userId": user.id, "access": given.access},
    )
    return given


async def unshare(db: Database, actor: Actor, kind: str, resource_id: str, user_name: str) -> bool:
    """Remove a share; False when there was none (nothing is audited then)."""
    checked = _kind(kind)
    await _owned(db, actor, checked, resource_id)
    user = await db.users.get_by_name(user_name)
    if user is None:
        raise NotFoundError("user", user_name)
    removed = await db.shares.unshare(checked, resource_id, user.id)
    if removed:
        await _audit(db, actor, "share.remove", f"{checked}:{resource_id}", {"userId": user.id})
    return removed
