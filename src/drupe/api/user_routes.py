"""Users, shares and the audit log over HTTP (issue 20, steps 5, 9 and the admin page's API).

* ``GET /api/users`` (admin): every user, ``{"items": [{id, name, email, role, disabled,
  createdAt, chatAccounts: [{channel, platformUserId}]}]}`` (the IM accounts each linked to
  themselves); ``DELETE /api/users/{name}/chat-accounts/{channel}/{platform_user_id}`` (admin)
  unlinks one: 204, 404 when the user has no such account (audited ``chat.unlink``).
  ``POST /api/users`` (admin) ``{name, password?, email?, role}``: 201 and the user (422 with
  what is wrong). ``PATCH /api/users/{name}`` (admin) ``{role?, disabled?}``:
  the user. Disabling ends every session of the user at once (and this node's cached
  sign-ins; other nodes within ``AuthSettings.cache_seconds``, open streams within
  ``sweep_seconds``). The last enabled admin cannot be demoted or disabled (422).
* ``GET /api/users/directory`` (any signed-in user): ``{"items": [{id, name}]}`` of the
  enabled users, for the share dialog (no e-mails, no roles).
* ``GET /api/shares/{kind}/{resource_id}``: ``{"items": [{userId, name, access}]}``;
  ``PUT /api/shares/{kind}/{resource_id}/{user_name}`` ``{"access": "read"|"write"}``: the share;
  ``DELETE`` the same path: 204. ``kind`` is ``conversation`` or ``agent``. Only the resource's
  owner or an admin; anyone else gets 404, as for a missing resource.
* ``GET /api/audit?limit=&action=`` (admin): the audit log, newest first (``limit`` 1..500).

The rules live in ``drupe.identity.user_admin`` (shared with ``drupe users``); every change is
audited there, with the caller and their address.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from pydantic import BaseModel, Field

from drupe.admission.principal import Principal
from drupe.api.auth_routes import client_address
from drupe.errors import NotFoundError, ValidationError
from drupe.http.state import get_caller, get_runtime, require_admin
from drupe.identity import user_admin
from drupe.persistence.audit import MAX_PAGE, AuditEvent
from drupe.persistence.chat_links import ChatAccount
from drupe.persistence.users import MAX_PASSWORD_CHARS, UserRecord

__all__ = ["router"]

router = APIRouter(tags=["users"])

_Admin = Annotated[Principal, Depends(require_admin)]
_Caller = Annotated[Principal, Depends(get_caller)]
_Kind = Annotated[str, Path(max_length=32, description="conversation or agent")]
_ResourceId = Annotated[str, Path(max_length=256)]
_UserName = Annotated[str, Path(max_length=64)]


class NewUser(BaseModel):
    name: str = Field(min_length=1, max_length=64)
    password: str | None = Field(default=None, max_length=MAX_PASSWORD_CHARS)
    email: str | None = Field(default=None, max_length=320)
    role: Literal["admin", "member"] = "member"


class UserChange(BaseModel):
    role: Literal["admin", "member"] | None = None
    disabled: bool | None = None


class ShareBody(BaseModel):
    access: Literal["read", "write"]


def _user_json(user: UserRecord, accounts: list[ChatAccount] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": user.id,
        "name": user.name,
        "email": user.email,
        "role": user.role,
        "disabled": user.disabled,
        "createdAt": user.created_at.isoformat(),
    }
    if accounts is not None:
        out["chatAccounts"] = [
            {"channel": a.channel_id, "platformUserId": a.platform_user_id} for a in accounts
        ]
    return out


def _event_json(event: AuditEvent) -> dict[str, Any]:
    return {
        "id": event.id,
        "at": event.at.isoformat(),
        "actorId": event.actor_id,
        "actorName": event.actor_name,
        "action": event.action,
        "target": event.target,
        "address": event.address,
        "detail": dict(event.detail),
    }


def _actor(request: Request, caller: Principal) -> user_admin.Actor:
    return user_admin.Actor.of(caller, client_address(request))


@router.get("/api/users")
async def list_users(request: Request, caller: _Admin) -> dict[str, Any]:
    """Every user (admins), with the chat accounts each linked to themselves."""
    db = get_runtime(request).db
    users = await db.users.list_users()
    accounts = await db.chat_links.every_account()
    return {"items": [_user_json(user, accounts.get(user.id, [])) for user in users]}


@router.post("/api/users", status_code=201)
async def create_user(body: NewUser, request: Request, caller: _Admin) -> dict[str, Any]:
    """Create a user (admins); without a password it signs in by SSO or a one-time link."""
    user = await user_admin.create_user(
        get_runtime(request).db,
        _actor(request, caller),
        body.name,
        password=body.password,
        role=body.role,
        email=body.email,
    )
    return _user_json(user)


@router.get("/api/users/directory")
async def directory(request: Request, caller: _Caller) -> dict[str, Any]:
    """The enabled users' ids and names (whom one can share with)."""
    users = await get_runtime(request).db.users.list_users()
    return {"items": [{"id": u.id, "name": u.name} for u in users if not u.disabled]}


@router.patch("/api/users/{name}")
async def change_user(
    name: _UserName, body: UserChange, request: Request, caller: _Admin
) -> dict[str, Any]:
    """Change a user's role or disable/enable them (admins)."""
    if body.role is None and body.disabled is None:
        raise ValidationError("give 'role' (admin or member) or 'disabled' (true or false)")
    runtime = get_runtime(request)
    user = await user_admin.change_user(
        runtime.db, _actor(request, caller), name, role=body.role, disabled=body.disabled
    )
    if runtime.authenticator is not None:
        runtime.authenticator.forget_user(user.id)  # this node's cached sign-ins, at once
    return _user_json(user)


@router.delete("/api/users/{name}/chat-accounts/{channel}/{platform_user_id:path}", status_code=204)
async def unlink_user_chat_account(
    name: _UserName, channel: str, platform_user_id: str, request: Request, caller: _Admin
) -> Response:
    """Unlink a user's chat account (admins): its chats act as the channel's default again."""
    db = get_runtime(request).db
    user = await db.users.get_by_name(name)
    if user is None or not await db.chat_links.unlink(channel, platform_user_id, user_id=user.id):
        raise NotFoundError("chat account", f"{name}: {channel}/{platform_user_id}")
    await db.audit.record(
        "chat.unlink",
        actor_id=caller.user_id,
        actor_name=caller.name,
        target=f"{channel}:{platform_user_id}",
        address=client_address(request),
        detail={"channel": channel, "user": name},
    )
    return Response(status_code=204)


@router.get("/api/shares/{kind}/{resource_id}")
async def list_shares(
    kind: _Kind, resource_id: _ResourceId, request: Request, caller: _Caller
) -> dict[str, Any]:
    """Whom a conversation or an agent is shared with (its owner or an admin)."""
    shares = await user_admin.shares_of(
        get_runtime(request).db, _actor(request, caller), kind, resource_id
    )
    return {"items": [{"userId": s.user_id, "name": s.name, "access": s.access} for s in shares]}


@router.put("/api/shares/{kind}/{resource_id}/{user_name}")
async def put_share(
    kind: _Kind,
    resource_id: _ResourceId,
    user_name: _UserName,
    body: ShareBody,
    request: Request,
    caller: _Caller,
) -> dict[str, Any]:
    """Share a conversation or an agent with a user, to read or to write."""
    given = await user_admin.share(
        get_runtime(request).db, _actor(request, caller), kind, resource_id, user_name, body.access
    )
    return {
        "kind": given.resource_kind,
        "resourceId": given.resource_id,
        "userId": given.user_id,
        "name": user_name,
        "access": given.access,
    }


@router.delete("/api/shares/{kind}/{resource_id}/{user_name}", status_code=204)
async def delete_share(
    kind: _Kind, resource_id: _ResourceId, user_name: _UserName, request: Request, caller: _Caller
) -> Response:
    """Stop sharing (204 also when it was not shared)."""
    await user_admin.unshare(
        get_runtime(request).db, _actor(request, caller), kind, resource_id, user_name
    )
    return Response(status_code=204)


@router.get("/api/audit")
async def audit(
    request: Request,
    caller: _Admin,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="Events listed.")] = 100,
    action: Annotated[str | None, Query(max_length=64, description="Only this action.")] = None,
) -> dict[str, Any]:
    """The audit log, newest first (admins)."""
    events = await get_runtime(request).db.audit.list(limit=limit, action=action)
    return {"items": [_event_json(event) for event in events]}
