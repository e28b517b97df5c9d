"""``TelegramAdapter``: a Telegram bot on ``python-telegram-bot`` v22 (async ``telegram.Bot``).

* Connect: ``getMe`` (through ``Bot.initialize``), ``setMyCommands``; then long polling
  (``getUpdates``, 30 s, ``message`` and ``callback_query`` updates) by default, or, with
  ``mode = "webhook"``, ``setWebhook`` to ``<public_url>/channels/<id>/telegram`` with the
  configured secret as ``secret_token``. A webhook request whose
  ``X-Telegram-Bot-Api-Secret-Token`` header does not match answers 401, nothing queued.
* Polling failures are reported (``inbox.disconnected``) and retried with backoff (1, 2, 5, 10,
  30, 60 s); a ``RetryAfter`` waits what Telegram asks. The poll runs in the channel's task.
* Inbound: text, captions, the largest photo and documents (refused past
  ``max_attachment_bytes`` by their announced size: never downloaded); ``update_id`` is the
  dedupe key. Inline-keyboard presses become ``ButtonPress``es; each is answered
  (``answerCallbackQuery``, its text shown to the presser) once the core decided it.
* Outbound: Markdown (model answers, Drupe's own texts) converted to MarkdownV2 by
  ``telegramify-markdown`` (every reserved character escaped; code, tables as code blocks) and
  sent with ``parse_mode=MarkdownV2``, live edits included; when Telegram refuses to parse it
  (400 "can't parse entities"), the same text is sent again as plain text: nothing is lost.
  Inline keyboards for buttons, ``editMessageText`` for edits ("message is not modified" is not
  an error; an edit removes the inline keyboard: a decided approval's buttons go),
  ``sendChatAction(typing)``. ``RetryAfter`` (HTTP 429) becomes ``RateLimited``.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any, Final, TypeVar

import anyio
import telegramify_markdown
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from telegram import (
    Bot,
    BotCommand,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    Update,
)
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, RetryAfter, TelegramError
from telegram.request import HTTPXRequest

from drupe.channels.chat_commands import COMMANDS
from drupe.channels.config import ChannelConfig
from drupe.channels.contract import Attachment, ButtonPress, Inbound, Inbox
from drupe.channels.outbox import Button, RateLimited

__all__ = ["TelegramAdapter"]

log = logging.getLogger(__name__)

DEFAULT_BASE_URL: Final = "https://api.telegram.org/bot"
POLL_TIMEOUT: Final = 30
BACKOFF: Final = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
SECRET_HEADER: Final = "X-Telegram-Bot-Api-Secret-Token"
_T = TypeVar("_T")


def _seconds(value: int | float | timedelta) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def markdown_v2(text: str) -> str | None:
    """``text`` (Markdown, as models and Drupe write it) as Telegram MarkdownV2, every reserved
    character escaped (``telegramify-markdown``); None if the converter fails."""
    try:
        return str(telegramify_markdown.markdownify(text))
    except Exception as err:  # a converter bug never loses the message: it goes plain
        log.warning("converting to MarkdownV2 failed (%s); sending plain text", err)
        return None


async def _formatted(call: Callable[[str, str | None], Awaitable[_T]], text: str) -> _T:
    """``call`` with ``text`` rendered as MarkdownV2; when Telegram refuses to parse it (400
    "can't parse entities", or too long once rendered), the same text again, plain."""
    rendered = markdown_v2(text)
    if rendered is None:
        return await call(text, None)
    try:
        return await call(rendered, ParseMode.MARKDOWN_V2)
    except BadRequest as err:
        reason = str(err).lower()
        if "can't parse entities" not in reason and "too long" not in reason:
            raise
        log.info("Telegram refused the MarkdownV2 (%s); sending plain text", err)
        return await call(text, None)


def _chat(chat_id: str) -> int | str:
    try:
        return int(chat_id)
    except ValueError:
        return chat_id


class TelegramAdapter:
    buttons = True
    limit = 4096

    def __init__(self, config: ChannelConfig, *, poll_timeout: int = POLL_TIMEOUT) -> None:
        if not config.token:
            raise ValueError("a Telegram channel needs its bot token (token_env)")
        base = config.base_url or DEFAULT_BASE_URL
        file_base = base[: -len("/bot")] + "/file/bot" if base.endswith("/bot") else base
        self.config = config
        self.poll_timeout = poll_timeout
        self.bot = Bot(
            config.token,
            base_url=base,
            base_file_url=file_base,
            request=HTTPXRequest(connection_pool_size=32, read_timeout=20.0),
            get_updates_request=HTTPXRequest(read_timeout=poll_timeout + 10.0),
        )
        self._inbox: Inbox | None = None

    # --- connection -----------------------------------------------------------------------------

    async def run(self, inbox: Inbox, *, receive: bool = True) -> None:
        async with self.bot:
            if not receive and self.config.mode != "webhook":
                inbox.connected()  # sending only: another cluster node polls
                await anyio.sleep_forever()
            await self.bot.set_my_commands([BotCommand(n, d) for n, d in COMMANDS.items()])
            self._inbox = inbox
            try:
                if self.config.mode == "webhook":
                    await self._set_webhook()
                    inbox.connected()
                    await anyio.sleep_forever()
                else:
                    await self.bot.delete_webhook()
                    await self._poll(inbox)
            finally:
                self._inbox = None

    async def _set_webhook(self) -> None:
        if not self.config.public_url:
            raise ValueError("Telegram webhook mode needs public_url")
        url = f"{self.config.public_url.rstrip('/')}/channels/{self.config.id}/telegram"
        await self.bot.set_webhook(
            url=url,
            secret_token=self.config.secret,
            allowed_updates=["message", "callback_query"],
        )

    async def _poll(self, inbox: Inbox) -> None:
        offset: int | None = None
        confirmed: int | None = None  # the offset of the last getUpdates that was sent
        failures = 0
        inbox.connected()
        try:
            while True:
                try:
                    confirmed = offset
                    updates = await self.bot.get_updates(
                        offset=offset,
                        timeout=self.poll_timeout,
                        allowed_updates=["message", "callback_query"],
                    )
                except RetryAfter as err:
                    await anyio.sleep(_seconds(err.retry_after))
                    continue
                except TelegramError as err:
                    inbox.disconnected(f"polling failed: {err}")
                    await anyio.sleep(BACKOFF[min(failures, len(BACKOFF) - 1)])
                    failures += 1
                    continue
                if failures:
                    failures = 0
                    inbox.connected()
                for update in updates:
                    offset = update.update_id + 1
                    await self._dispatch(update, inbox)
        finally:
            if offset is not None and offset != confirmed:
                await self._confirm(offset)

    async def _confirm(self, offset: int) -> None:
        """Stopping with handled updates unconfirmed (Telegram confirms them only with the next
        ``getUpdates``): confirm them, so the next poller (this process after a restart, or
        another cluster node taking over) does not answer them again. Best effort, bounded."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(2.0):
            try:
                await self.bot.get_updates(offset=offset, timeout=0)
            except TelegramError as err:
                log.debug("confirming the last updates failed: %s", err)

    # --- inbound --------------------------------------------------------------------------------

    async def _dispatch(self, update: Update, inbox: Inbox) -> None:
        event_id = f"tg:{update.update_id}"
        query = update.callback_query
        if query is not None and query.data and query.message is not None:
            user = query.from_user
            inbox.button(  # answered (answerCallbackQuery) once the press is decided
                ButtonPress(
                    chat_id=str(query.message.chat.id),
                    user_id=str(user.id),
                    data=query.data,
                    event_id=event_id,
                    user_name=f"@{user.username}" if user.username else user.first_name,
                    answer_id=query.id,
                )
            )
            return
        message = update.message
        if message is None or message.from_user is None or message.from_user.is_bot:
            return
        attachments, oversized = await self._attachments(message)
        text = message.text or message.caption or ""
        if not text and not attachments and not oversized:
            return
        inbox.message(
            Inbound(
                chat_id=str(message.chat.id),
                user_id=str(message.from_user.id),
                user_name=message.from_user.first_name or "",
                text=text,
                message_id=str(message.message_id),
                event_id=event_id,
                attachments=tuple(attachments),
                oversized=tuple(oversized),
            )
        )

    async def _attachments(self, message: Message) -> tuple[list[Attachment], list[str]]:
        found: list[tuple[str, str, str, int | None]] = []
        if message.photo:
            photo = message.photo[-1]
            found.append(
                (photo.file_id, f"photo-{photo.file_unique_id}.jpg", "image/jpeg", photo.file_size)
            )
        if message.document is not None:
            doc = message.document
            found.append(
                (
                    doc.file_id,
                    doc.file_name or f"file-{doc.file_unique_id}",
                    doc.mime_type or "application/octet-stream",
                    doc.file_size,
                )
            )
        cap = self.config.max_attachment_bytes
        attachments: list[Attachment] = []
        oversized: list[str] = []
        for file_id, name, media_type, size in found:
            if size is not None and size > cap:
                oversized.append(name)
                continue
            file = await self.bot.get_file(file_id)
            data = bytes(await file.download_as_bytearray())
            if len(data) > cap:
                oversized.append(name)
                continue
            attachments.append(Attachment(name, media_type, data))
        return attachments, oversized

    async def handle_http(self, request: Request, path: str) -> Response:
        if request.method != "POST" or path != "telegram" or self.config.mode != "webhook":
            return JSONResponse({"detail": "not found"}, 404)
        expected = self.config.secret or ""
        given = request.headers.get(SECRET_HEADER, "")
        if not expected or not hmac.compare_digest(given.encode(), expected.encode()):
            return JSONResponse({"detail": "bad or missing secret token"}, 401)
        inbox = self._inbox
        if inbox is None:
            return JSONResponse({"detail": "the channel is not running"}, 503)
        try:
            update = Update.de_json(await request.json(), self.bot)
        except (ValueError, TypeError, KeyError) as err:
            return JSONResponse({"detail": f"malformed update: {err}"}, 400)
        await self._dispatch(update, inbox)
        return JSONResponse({"ok": True})

    # --- outbound -------------------------------------------------------------------------------

    async def send(self, chat_id: str, text: str, *, buttons: Sequence[Button] = ()) -> str:
        markup: Any = None
        if buttons:
            markup = InlineKeyboardMarkup(
                [[InlineKeyboardButton(b.label, callback_data=b.data) for b in buttons]]
            )

        async def send(body: str, parse_mode: str | None) -> Message:
            return await self.bot.send_message(
                chat_id=_chat(chat_id), text=body, parse_mode=parse_mode, reply_markup=markup
            )

        try:
            sent = await _formatted(send, text)
        except RetryAfter as err:
            raise RateLimited(_seconds(err.retry_after)) from err
        return str(sent.message_id)

    async def edit(
        self, chat_id: str, message_id: str, text: str, *, drop_buttons: bool = False
    ) -> None:
        # An edit without ``reply_markup`` removes the inline keyboard: every edit drops it.
        async def edit(body: str, parse_mode: str | None) -> Any:
            return await self.bot.edit_message_text(
                text=body, chat_id=_chat(chat_id), message_id=int(message_id), parse_mode=parse_mode
            )

        try:
            await _formatted(edit, text)
        except RetryAfter as err:
            raise RateLimited(_seconds(err.retry_after)) from err
        except BadRequest as err:
            if "not modified" not in str(err).lower():
                raise

    async def typing(self, chat_id: str) -> None:
        try:
            await self.bot.send_chat_action(chat_id=_chat(chat_id), action=ChatAction.TYPING)
        except RetryAfter as err:
            raise RateLimited(_seconds(err.retry_after)) from err

    async def answer(self, press: ButtonPress, text: str) -> None:
        if press.answer_id is None:
            return
        try:
            await self.bot.answer_callback_query(press.answer_id, text=text[:200] or None)
        except TelegramError as err:  # too late (Telegram keeps a query for minutes), ...
            log.debug("answerCallbackQuery failed: %s", err)
