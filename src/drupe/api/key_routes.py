"""Gateway API keys as the signed-in user's own (issue 22, the settings' keys page).

* ``GET /api/keys``: ``{"items": [key]}``, the caller's keys, revoked ones included, oldest
  first; an admin gets every key, each with its owner's name (``ownerName``; None for a key
  from before identity). A key is ``{id, name, prefix, createdAt, lastUsedAt, revoked,
  revokedAt, models, agents, requestsPerMinute, tokensPerDay, ownerId, ownerName}``; the
  secret is never listed.
* ``POST /api/keys`` ``{name, models?, agents?, requestsPerMinute?, tokensPerDay?}``: 201 with
  the key and its plaintext (``key``), shown this once and stored only as a hash. The owner
  is the caller (None with identity off, as for everything created then). ``models`` and
  ``agents`` are the ids the key may use (absent or null: any; at most ``MAX_SCOPE_IDS``);
  the budgets are positive integers (absent or null: unlimited). Bad input is a 422.
* ``DELETE /api/keys/{key_id}``: revokes the key (revoking twice keeps the first time) and
  answers it. Another member's key, or an unknown id, is a 404 alike; an admin may revoke any.
  The gateway keeps a verified key for up to ``drupe.gateway.keys._CACHE_SECONDS`` (10 s), so
  a revoked key may still pass that long on a node that had just verified it.

Creating and revoking are audited (``key.create``, ``key.revoke``) with the caller, their
address, the key's id and name; never its secret.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from pydantic import BaseModel, Field

from drupe.admission.principal import Principal
from drupe.api.auth_routes import client_address
from drupe.errors import NotFoundError
from drupe.http.state import get_caller, get_runtime
from drupe.persistence.records import ApiKeyRecord, KeyScopes

__all__ = ["MAX_SCOPE_IDS", "router"]

router = APIRouter(tags=["keys"])

MAX_SCOPE_IDS = 100

_Caller = Annotated[Principal, Depends(get_caller)]
_ScopeIds = list[Annotated[str, Field(min_length=1, max_length=256)]]


class NewKey(BaseModel):
    name: str = Field(min_length=1, max_length=100)
    models: _ScopeIds | None = Field(default=None, max_length=MAX_SCOPE_IDS)
    agents: _ScopeIds | None = Field(default=None, max_length=MAX_SCOPE_IDS)
    requestsPerMinute: int | None = Field(default=None, ge=1, le=1_000_000)
    tokensPerDay: int | None = Field(default=None, ge=1, le=10**12)


def _key_json(record: ApiKeyRecord, owners: dict[str, str]) -> dict[str, Any]:
    return {
        "id": record.id,
        "name": record.name,
        "prefix": record.prefix,
        "createdAt": record.created_at.isoformat(),
        "lastUsedAt": record.last_used_at.isoformat() if record.last_used_at else None,
        "revoked": record.revoked_at is not None,
        "revokedAt": record.revoked_at.isoformat() if record.revoked_at else None,
        "models": list(record.allowed_models) if record.allowed_models is not None else None,
        "agents": list(record.allowed_agents) if record.allowed_agents is not None else None,
        "requestsPerMinute": record.requests_per_minute,
        "tokensPerDay": record.tokens_per_day,
        "ownerId": record.owner_id,
        "ownerName": owners.get(record.owner_id) if record.owner_id is not None else None,
    }


async def _owners(request: Request) -> dict[str, str]:
    return {user.id: user.name for user in await get_runtime(request).db.users.list_users()}


async def _visible(request: Request, caller: Principal) -> list[ApiKeyRecord]:
    """The keys the caller may see and revoke: their own, or every key for an admin."""
    db = get_runtime(request).db
    return await db.api_keys.list(owner_id=None if caller.is_admin else caller.user_id)


async def _audit(request: Request, caller: Principal, action: str, record: ApiKeyRecord) -> None:
    await get_runtime(request).db.audit.record(
        action,
        actor_id=caller.user_id,
        actor_name=caller.name,
        target=record.id,
        address=client_address(request),
        detail={"name": record.name, "prefix": record.prefix, "ownerId": record.owner_id},
    )


@router.get("/api/keys")
async def list_keys(request: Request, caller: _Caller) -> dict[str, Any]:
    """The caller's gateway keys (an admin: every key, with its owner's name)."""
    owners = await _owners(request)
    return {"items": [_key_json(record, owners) for record in await _visible(request, caller)]}


@router.post("/api/keys", status_code=201)
async def create_key(body: NewKey, request: Request, caller: _Caller) -> dict[str, Any]:
    """Create a gateway key owned by the caller; its plaintext is in this answer only."""
    runtime = get_runtime(request)
    owner = runtime.resources.owner_of_new(caller) if runtime.resources is not None else None
    scopes = KeyScopes(
        models=body.models,
        agents=body.agents,
        requests_per_minute=body.requestsPerMinute,
        tokens_per_day=body.tokensPerDay,
    )
    plaintext, record = await runtime.db.api_keys.create(body.name.strip(), scopes, owner_id=owner)
    await _audit(request, caller, "key.create", record)
    return {**_key_json(record, await _owners(request)), "key": plaintext}


@router.delete("/api/keys/{key_id}")
async def revoke_key(
    key_id: Annotated[str, Path(max_length=64)], request: Request, caller: _Caller
) -> dict[str, Any]:
    """Revoke one of the caller's keys (an admin: any key); anyone else's is a 404."""
    if not any(record.id == key_id for record in await _visible(request, caller)):
        raise NotFoundError("API key", key_id)
    record = await get_runtime(request).db.api_keys.revoke(key_id)
    await _audit(request, caller, "key.revoke", record)
    return _key_json(record, await _owners(request))
