"""``SlackAdapter``: a Slack app on ``slack-bolt`` (async) with ``slack-sdk``'s async WebClient.

* HTTP mode (default): Bolt's ``AsyncApp`` answers the Events API and interactivity requests
  that the gateway mounts at ``/channels/<id>/slack/events``. Bolt verifies every request's
  signature with the signing secret (401, nothing queued, on failure) and acknowledges at once
  (``process_before_response=False``); Drupe's inbox dedupes by ``event_id``, so Slack's
  redelivery of an event (no 200 within 3 s, ``X-Slack-Retry-Num``) never starts a second turn.
* Socket Mode (``mode = "socket"``, needs ``app_token_env``): the same Bolt app over
  ``AsyncSocketModeHandler``.
* Chats: a DM is one chat (its channel id); in a channel every thread is its own chat,
  ``<channel>:<thread_ts>`` (a top-level message starts a thread), and replies go into that
  thread (``thread_ts``). Mentions (``<@U...>``) are stripped; bot messages, edits and other
  subtypes are ignored.
* Approvals: Block Kit buttons (``action_id`` approve/deny, ``value`` the approval data). A
  press is answered to its presser by an ephemeral message (``chat.postEphemeral``); a decided
  approval's message is updated with blocks of its text alone (its buttons removed).
* Outbound: ``chat.postMessage`` / ``chat.update``; a 429 (``SlackApiError``) becomes
  ``RateLimited`` with its ``Retry-After``; messages are at most 4,000 characters. Slack has no
  typing API for bots: ``typing`` does nothing.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any, Final

import anyio
from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from drupe.channels.config import ChannelConfig
from drupe.channels.contract import ButtonPress, Inbound, Inbox
from drupe.channels.outbox import Button, RateLimited

__all__ = ["SlackAdapter"]

DEFAULT_BASE_URL: Final = "https://slack.com/api/"
_MENTION: Final = re.compile(r"<@[A-Z0-9]+>\s*")
_ACTIONS: Final = re.compile(r"^(approve|deny)$")
SECTION_LIMIT: Final = 3000


def _split_chat(chat_id: str) -> tuple[str, str | None]:
    channel, _, thread = chat_id.partition(":")
    return channel, thread or None


class SlackAdapter:
    buttons = True
    limit = 4000

    def __init__(self, config: ChannelConfig) -> None:
        if not config.token or not config.secret:
            raise ValueError("a Slack channel needs token_env and secret_env")
        self.config = config
        self.client = AsyncWebClient(
            token=config.token, base_url=config.base_url or DEFAULT_BASE_URL
        )
        self.app = AsyncApp(  # the token comes from the client (both: Bolt warns at start)
            signing_secret=config.secret,
            client=self.client,
            process_before_response=False,
        )
        self.handler = AsyncSlackRequestHandler(self.app)
        self.app.event("message")(self._on_message)
        self.app.event("app_mention")(self._on_message)
        self.app.action(_ACTIONS)(self._on_action)
        self.app.command(config.slash_command)(self._on_command)
        self._inbox: Inbox | None = None

    # --- connection -----------------------------------------------------------------------------

    async def run(self, inbox: Inbox, *, receive: bool = True) -> None:
        await self.client.auth_test()
        self._inbox = inbox
        try:
            if self.config.mode == "socket" and receive:
                from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

                socket = AsyncSocketModeHandler(self.app, self.config.secrets["app_token"])
                await socket.connect_async()  # type: ignore[no-untyped-call]
                inbox.connected()
                try:
                    await anyio.sleep_forever()
                finally:
                    with anyio.CancelScope(shield=True):
                        await socket.close_async()  # type: ignore[no-untyped-call]
            else:
                inbox.connected()
                await anyio.sleep_forever()
        finally:
            self._inbox = None

    async def handle_http(self, request: Request, path: str) -> Response:
        if path not in ("slack/events", "slack/actions", "slack/commands", "slack"):
            return JSONResponse({"detail": "not found"}, 404)
        if self._inbox is None:
            return JSONResponse({"detail": "the channel is not running"}, 503)
        return await self.handler.handle(request)

    # --- inbound (Bolt listeners: they only queue) ----------------------------------------------

    async def _on_message(self, event: dict[str, Any], body: dict[str, Any]) -> None:
        inbox = self._inbox
        if inbox is None or event.get("bot_id") or event.get("subtype"):
            return
        user = event.get("user")
        channel = event.get("channel")
        if not user or not channel:
            return
        text = _MENTION.sub("", str(event.get("text") or "")).strip()
        if not text:
            return
        if event.get("channel_type") == "im":
            chat_id = str(channel)
        else:
            chat_id = f"{channel}:{event.get('thread_ts') or event.get('ts')}"
        inbox.message(
            Inbound(
                chat_id=chat_id,
                user_id=str(user),
                user_name=str(user),
                text=text,
                message_id=event.get("ts"),
                event_id=body.get("event_id") or f"{channel}:{event.get('ts')}",
            )
        )

    async def _on_command(self, ack: Any, command: dict[str, Any]) -> None:
        """``/drupe stop`` (the configured slash command): the chat command ``/stop`` of the DM
        or channel it was typed in. Slack hands a message starting with ``/`` to its slash
        commands, never to the events, so this is the way to send a chat command."""
        words = str(command.get("text") or "").strip()
        await ack(response_type="ephemeral", text=f"{self.config.slash_command} {words}".strip())
        inbox = self._inbox
        channel, user = command.get("channel_id"), command.get("user_id")
        if inbox is None or not channel or not user:
            return
        inbox.message(
            Inbound(
                chat_id=str(channel),
                user_id=str(user),
                user_name=str(command.get("user_name") or user),
                text=f"/{words}" if words else "/help",
                message_id=command.get("trigger_id"),
                event_id=f"command:{command.get('trigger_id') or time.time_ns()}",
            )
        )

    async def _on_action(self, ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()
        inbox = self._inbox
        if inbox is None:
            return
        channel = (body.get("channel") or {}).get("id")
        message = body.get("message") or {}
        thread = message.get("thread_ts") or message.get("ts")
        is_dm = str(channel or "").startswith("D")
        chat_id = str(channel) if is_dm or not thread else f"{channel}:{thread}"
        user = body.get("user") or {}
        inbox.button(
            ButtonPress(
                chat_id=chat_id,
                user_id=str(user.get("id")),
                data=str(action.get("value")),
                event_id=f"action:{action.get('action_ts')}:{action.get('value')}",
                user_name=str(user.get("username") or user.get("name") or ""),
            )
        )

    # --- outbound -------------------------------------------------------------------------------

    async def send(self, chat_id: str, text: str, *, buttons: Sequence[Button] = ()) -> str:
        channel, thread = _split_chat(chat_id)
        kwargs: dict[str, Any] = {"channel": channel, "text": text}
        if thread:
            kwargs["thread_ts"] = thread
        if buttons:
            kwargs["blocks"] = [
                _section(text),
                {
                    "type": "actions",
                    "elements": [
                        {
                            "type": "button",
                            "text": {"type": "plain_text", "text": b.label},
                            "action_id": b.data.partition(":")[0],
                            "value": b.data,
                        }
                        for b in buttons
                    ],
                },
            ]
        try:
            response = await self.client.chat_postMessage(**kwargs)
        except SlackApiError as err:
            raise _translated(err) from err
        return str(response["ts"])

    async def edit(
        self, chat_id: str, message_id: str, text: str, *, drop_buttons: bool = False
    ) -> None:
        channel, _thread = _split_chat(chat_id)
        kwargs: dict[str, Any] = {"channel": channel, "ts": message_id, "text": text}
        if drop_buttons:  # blocks left out may be kept: replace them by the text alone
            kwargs["blocks"] = [_section(text)]
        try:
            await self.client.chat_update(**kwargs)
        except SlackApiError as err:
            raise _translated(err) from err

    async def answer(self, press: ButtonPress, text: str) -> None:
        if not text or not press.user_id:
            return
        channel, thread = _split_chat(press.chat_id)
        kwargs: dict[str, Any] = {"channel": channel, "user": press.user_id, "text": text}
        if thread:
            kwargs["thread_ts"] = thread
        try:
            await self.client.chat_postEphemeral(**kwargs)
        except SlackApiError as err:
            raise _translated(err) from err

    async def typing(self, chat_id: str) -> None:
        return None


def _section(text: str) -> dict[str, Any]:
    """A mrkdwn section block (Slack refuses one over 3,000 characters)."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[:SECTION_LIMIT]}}


def _translated(err: SlackApiError) -> Exception:
    response = err.response
    if getattr(response, "status_code", None) == 429:
        retry = response.headers.get("Retry-After") or response.headers.get("retry-after") or "1"
        return RateLimited(float(retry))
    return RuntimeError(f"Slack API error: {response.get('error', 'unknown')}")
