"""Channel routes: ``/api/channels`` (state, REST) and the platform endpoints under ``/channels``.

* ``GET /api/channels``: every configured channel with its public config (env var NAMES, never
  values), state, last error (redacted), active and bound chats.
* ``GET /api/channels/{id}``: one channel; 404 when unknown.
* ``POST /api/channels/{id}/chats/{chat}/messages``: deliver a text to a chat (the same port
  scheduled tasks use): at most once per ``deliveryId``.
* ``POST /channels/{id}/{path}``: the platform's inbound requests (Slack events and actions, the
  signed webhook, Telegram's webhook mode); the adapter verifies the signature (401 on failure,
  nothing stored).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from drupe.api.agent_routes import NotFound
from drupe.http.state import get_runtime, require_admin

if TYPE_CHECKING:
    from drupe.channels.service import ChannelService

__all__ = ["router"]

router = APIRouter(tags=["channels"])


class DeliverRequest(BaseModel):
    text: str = Field(min_length=1, max_length=100_000)
    deliveryId: str | None = Field(default=None, max_length=64)


class DeliverResult(BaseModel):
    deliveryId: str


def _service(request: Request) -> ChannelService | None:
    return get_runtime(request).channels


@router.get("/api/channels")
async def list_channels(request: Request) -> list[dict[str, Any]]:
    require_admin(request)
    service = _service(request)
    return await service.status() if service is not None else []


@router.get("/api/channels/{channel_id}")
async def get_channel(channel_id: str, request: Request) -> dict[str, Any]:
    require_admin(request)
    service = _service(request)
    for channel in await service.status() if service is not None else []:
        if channel["id"] == channel_id:
            return channel
    raise NotFound(f"unknown channel {channel_id!r}")


@router.post("/api/channels/{channel_id}/chats/{chat_id}/messages", status_code=202)
async def deliver(
    channel_id: str, chat_id: str, body: DeliverRequest, request: Request
) -> DeliverResult:
    require_admin(request)
    service = _service(request)
    if service is None or channel_id not in service.channels:
        raise NotFound(f"unknown channel {channel_id!r}")
    return DeliverResult(
        deliveryId=service.deliver(channel_id, chat_id, body.text, delivery_id=body.deliveryId)
    )


@router.post("/channels/{channel_id}/{path:path}", include_in_schema=False)
async def platform_request(channel_id: str, path: str, request: Request) -> Response:
    service = _service(request)
    if service is None or channel_id not in service.channels:
        return Response(status_code=404)
    return await service.handle_http(channel_id, path, request)
