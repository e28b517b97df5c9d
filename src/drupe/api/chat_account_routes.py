"""The caller's IM accounts: ``/api/auth/chat-accounts`` (linking a chat account to oneself).

* ``GET /api/auth/chat-accounts``: the caller's linked accounts (``channel``,
  ``platformUserId``, ``linkedAt``) and the channels they can link on (``id``, ``type``,
  ``linkCommand``: what to type before the code there, ``/link``, or on Slack the channel's
  slash command and ``link``, since Slack keeps ``/...`` messages for its own commands).
* ``POST /api/auth/chat-accounts/code`` (201): a one-time code, good for ``CODE_TTL`` seconds;
  sending ``/link <code>`` to a channel's bot links the sending account
  (``drupe.persistence.chat_links``). A new code replaces the caller's previous one.
* ``DELETE /api/auth/chat-accounts/{channel}/{platform_user_id}`` (204): unlink one of the
  caller's accounts; 404 when it is not theirs. The account id is the rest of the path, so an
  id with a ``/`` (a webhook bridge's) works too.

Every change is audited (``chat.link_code``, ``chat.unlink``; the link itself is audited by the
channel as ``chat.link``). A request without a signed-in user is 401 like every ``/api`` route.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Final

from fastapi import APIRouter, Depends, Request, Response

from drupe.admission.principal import LOCAL_ADMIN, Principal
from drupe.api.auth_routes import client_address
from drupe.errors import NotFoundError, ValidationError
from drupe.http.state import get_caller, get_runtime

if TYPE_CHECKING:
    from drupe.channels.config import ChannelConfig

__all__ = ["CODE_TTL", "link_command", "router"]

router = APIRouter(tags=["auth"])

CODE_TTL: Final = 600.0
"""Seconds a link code is good for."""


def link_command(config: ChannelConfig) -> str:
    """What to type before the code on this channel: Slack keeps ``/...`` for its own commands,
    so there it is the channel's slash command with ``link`` (``/drupe link``)."""
    return f"{config.slash_command} link" if config.type == "slack" else "/link"


def _person(caller: Principal) -> Principal:
    if caller == LOCAL_ADMIN:  # auth off: one local admin, who has no user row to link to
        raise ValidationError("linking a chat account needs sign-in (DRUPE_AUTH on)")
    return caller


@router.get("/api/auth/chat-accounts")
async def list_chat_accounts(
    request: Request, caller: Annotated[Principal, Depends(get_caller)]
) -> dict[str, Any]:
    runtime = get_runtime(request)
    accounts = await runtime.db.chat_links.accounts(_person(caller).user_id)
    service = runtime.channels
    channels = [] if service is None else service.configs
    return {
        "accounts": [
            {
                "channel": account.channel_id,
                "platformUserId": account.platform_user_id,
                "linkedAt": account.linked_at.isoformat(),
            }
            for account in accounts
        ],
        "channels": [
            {
                "id": config.id,
                "type": config.type,
                "linkCommand": link_command(config),
            }
            for config in channels
        ],
    }


@router.post("/api/auth/chat-accounts/code", status_code=201)
async def make_link_code(
    request: Request, caller: Annotated[Principal, Depends(get_caller)]
) -> dict[str, Any]:
    runtime = get_runtime(request)
    person = _person(caller)
    code, expires_at = await runtime.db.chat_links.make_code(person.user_id, ttl=CODE_TTL)
    await runtime.db.audit.record(
        "chat.link_code",
        actor_id=person.user_id,
        actor_name=person.name,
        target=person.user_id,
        address=client_address(request),
    )
    return {"code": code, "command": f"/link {code}", "expiresAt": expires_at.isoformat()}


@router.delete("/api/auth/chat-accounts/{channel}/{platform_user_id:path}", status_code=204)
async def unlink_chat_account(
    channel: str,
    platform_user_id: str,
    request: Request,
    caller: Annotated[Principal, Depends(get_caller)],
) -> Response:
    runtime = get_runtime(request)
    person = _person(caller)
    if not await runtime.db.chat_links.unlink(channel, platform_user_id, user_id=person.user_id):
        raise NotFoundError("chat account", f"{channel}/{platform_user_id}")
    await runtime.db.audit.record(
        "chat.unlink",
        actor_id=person.user_id,
        actor_name=person.name,
        target=f"{channel}:{platform_user_id}",
        address=client_address(request),
        detail={"channel": channel},
    )
    return Response(status_code=204)
