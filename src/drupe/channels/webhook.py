"""``WebhookAdapter``: the generic signed webhook channel, for any bridge (Discord, Matrix, ...).

Inbound: ``POST /channels/<id>/webhook`` with a JSON body, signed (``drupe.channels.signing``):

* ``{"type": "message", "chatId", "userId", "userName"?, "text", "messageId"?, "eventId"?,
  "attachments"?: [{"name", "mediaType", "data": base64}]}``
* ``{"type": "button", "chatId", "userId", "userName"?, "data", "eventId"?}`` (an approval
  button press)

A missing or wrong signature, or a timestamp outside the 5-minute window, answers 401 and
nothing is queued or stored; a malformed body answers 400; an accepted one 202 at once.

Outbound: signed ``POST``s to the configured ``url``: ``{"type": "send", "chatId", "messageId",
"text", "buttons": [{"label", "data"}]}``, ``{"type": "edit", "chatId", "messageId", "text",
"buttons": []}`` (an edit removes the message's buttons), ``{"type": "typing", "chatId"}`` and
``{"type": "answer", "chatId", "userId", "eventId", "text"}`` (the answer to a button press,
for its presser only: "Approved.", "Already decided: approved by Ann.", ...). ``messageId``
is Drupe's (the bridge maps it to its platform's). A 429 answer (``Retry-After`` seconds)
raises ``RateLimited``; another non-2xx raises. Messages are at most ``limit`` (4,000) characters.
"""

from __future__ import annotations

import base64
import binascii
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import httpx
import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from drupe.channels.config import ChannelConfig
from drupe.channels.contract import Attachment, ButtonPress, Inbound, Inbox
from drupe.channels.outbox import Button, RateLimited
from drupe.channels.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign, verify

__all__ = ["WebhookAdapter"]

MAX_BODY = 32 * 1024 * 1024


class WebhookAdapter:
    buttons = True
    limit = 4000

    def __init__(
        self,
        config: ChannelConfig,
        *,
        client: httpx.AsyncClient | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if not config.secret or not config.url:
            raise ValueError("a webhook channel needs secret_env and url")
        self.config = config
        self.secret: str = config.secret
        self.url: str = config.url
        self.wall_clock = wall_clock
        self._client = client
        self._inbox: Inbox | None = None

    async def run(self, inbox: Inbox, *, receive: bool = True) -> None:
        self._inbox = inbox
        async with httpx.AsyncClient(timeout=15.0) as client:
            if self._client is None:
                self._client = client
            inbox.connected()
            try:
                await anyio.sleep_forever()
            finally:
                self._inbox = None

    # --- inbound --------------------------------------------------------------------------------

    async def handle_http(self, request: Request, path: str) -> Response:
        if request.method != "POST" or path not in ("", "webhook"):
            return JSONResponse({"detail": "POST /channels/<id>/webhook"}, 404)
        body = await request.body()
        if len(body) > MAX_BODY:
            return JSONResponse({"detail": "the body is too large"}, 413)
        if not verify(
            self.secret,
            request.headers.get(TIMESTAMP_HEADER),
            request.headers.get(SIGNATURE_HEADER),
            body,
            now=self.wall_clock(),
        ):
            return JSONResponse({"detail": "bad or missing signature"}, 401)
        inbox = self._inbox
        if inbox is None:
            return JSONResponse({"detail": "the channel is not running"}, 503)
        try:
            item = _parse(orjson.loads(body), self.config.max_attachment_bytes)
        except (orjson.JSONDecodeError, ValueError, TypeError, binascii.Error) as err:
            return JSONResponse({"detail": f"malformed body: {err}"}, 400)
        if isinstance(item, ButtonPress):
            inbox.button(item)
        else:
            inbox.message(item)
        return JSONResponse({"accepted": True}, 202)

    # --- outbound -------------------------------------------------------------------------------

    async def _post(self, payload: dict[str, Any]) -> None:
        client = self._client
        if client is None:
            raise RuntimeError("the webhook channel is not running")
        body = orjson.dumps(payload)
        stamp = str(int(self.wall_clock()))
        response = await client.post(
            self.url,
            content=body,
            headers={
                "content-type": "application/json",
                TIMESTAMP_HEADER: stamp,
                SIGNATURE_HEADER: sign(self.secret, stamp, body),
            },
        )
        if response.status_code == 429:
            raise RateLimited(float(response.headers.get("retry-after", "1")))
        if response.status_code >= 300:
            raise RuntimeError(f"the webhook receiver answered HTTP {response.status_code}")

    async def send(self, chat_id: str, text: str, *, buttons: Sequence[Button] = ()) -> str:
        message_id = uuid.uuid4().hex
        await self._post(
            {
                "type": "send",
                "chatId": chat_id,
                "messageId": message_id,
                "text": text,
                "buttons": [{"label": b.label, "data": b.data} for b in buttons],
            }
        )
        return message_id

    async def edit(
        self, chat_id: str, message_id: str, text: str, *, drop_buttons: bool = False
    ) -> None:
        await self._post(
            {
                "type": "edit",
                "chatId": chat_id,
                "messageId": message_id,
                "text": text,
                "buttons": [],
            }
        )

    async def answer(self, press: ButtonPress, text: str) -> None:
        await self._post(
            {
                "type": "answer",
                "chatId": press.chat_id,
                "userId": press.user_id,
                "eventId": press.event_id,
                "text": text,
            }
        )

    async def typing(self, chat_id: str) -> None:
        await self._post({"type": "typing", "chatId": chat_id})


def _text(data: dict[str, Any], key: str, *, required: bool = True) -> str:
    value = data.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str | int) or value == "":
        raise ValueError(f"{key!r} must be a non-empty string")
    return str(value)


def _parse(data: Any, cap: int) -> Inbound | ButtonPress:
    if not isinstance(data, dict):
        raise ValueError("the body must be a JSON object")
    kind = data.get("type", "message")
    chat_id, user_id = _text(data, "chatId"), _text(data, "userId")
    event_id = _text(data, "eventId", required=False) or None
    if kind == "button":
        return ButtonPress(
            chat_id=chat_id,
            user_id=user_id,
            data=_text(data, "data"),
            event_id=event_id,
            user_name=_text(data, "userName", required=False),
        )
    if kind != "message":
        raise ValueError("'type' must be 'message' or 'button'")
    attachments: list[Attachment] = []
    oversized: list[str] = []
    for raw in data.get("attachments") or ():
        if not isinstance(raw, dict):
            raise ValueError("attachments must be objects")
        name = _text(raw, "name")
        blob = base64.b64decode(_text(raw, "data"), validate=True)
        if len(blob) > cap:
            oversized.append(name)
            continue
        attachments.append(Attachment(name, _text(raw, "mediaType"), blob))
    text = data.get("text", "")
    if not isinstance(text, str):
        raise ValueError("'text' must be a string")
    return Inbound(
        chat_id=chat_id,
        user_id=user_id,
        user_name=_text(data, "userName", required=False),
        text=text,
        message_id=_text(data, "messageId", required=False) or None,
        event_id=event_id,
        attachments=tuple(attachments),
        oversized=tuple(oversized),
    )
