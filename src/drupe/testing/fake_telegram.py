"""A loopback fake of the Telegram Bot API for python-telegram-bot (``Bot(base_url=...)``).

Serves ``POST /bot<token>/<method>`` (form or JSON bodies, as PTB sends them) and file
downloads under ``/file/bot<token>/``. It records every call (``recorder``), keeps each chat's
messages with their current text (``messages(chat_id)``), and answers like Telegram: ``getMe``,
``getUpdates`` (a real long poll over the updates a test pushes with ``push_message`` /
``push_photo`` / ``push_callback``), ``sendMessage``, ``editMessageText`` (400 "message is not
modified" for the same text and keyboard; an edit without ``reply_markup`` removes the inline
keyboard, as Telegram does: ``keyboard(chat_id, message_id)`` is a message's current one),
``sendChatAction``, ``answerCallbackQuery`` (once per query id, else 400, as Telegram;
``answers()`` are the texts shown to the pressers), ``setMyCommands``, ``deleteWebhook``,
``setWebhook``, ``getFile``.

Formatting: a text sent or edited with ``parse_mode=MarkdownV2`` is parsed as Telegram parses
it (``drupe.testing.markdown_v2``): a reserved character left unescaped or an unclosed entity
answers 400 "Bad Request: can't parse entities: ...". A message keeps what its user SEES
(``messages``, trailing whitespace trimmed as Telegram does) and its entities (``entities``);
the recorded call keeps the source and its ``parse_mode``.

Faults come from the ``PlatformRecorder``: a 429 answers ``{"ok": false, "error_code": 429,
"parameters": {"retry_after": N}}``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from drupe.testing.fake_platform import PlatformRecorder, request_params
from drupe.testing.loopback import serve_app
from drupe.testing.markdown_v2 import Entity, MarkdownV2Error, parse

__all__ = ["FakeTelegram", "fake_telegram"]

BOT = {"id": 4242, "is_bot": True, "first_name": "Drupe", "username": "drupe_test_bot"}


@dataclass
class FakeTelegram:
    recorder: PlatformRecorder = field(default_factory=PlatformRecorder)
    base_url: str = ""
    updates: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    texts: dict[tuple[str, int], str] = field(default_factory=dict)
    keyboards: dict[tuple[str, int], Any] = field(default_factory=dict)
    styles: dict[tuple[str, int], list[Entity]] = field(default_factory=dict)
    answered: set[str] = field(default_factory=set)
    _order: list[tuple[str, int]] = field(default_factory=list)
    _update_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _message_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(100))
    _new_update: anyio.Event = field(default_factory=anyio.Event)
    closing: bool = False

    # --- what tests push ------------------------------------------------------------------------

    def _push(self, update: dict[str, Any]) -> int:
        update_id = next(self._update_ids)
        self.updates.append({"update_id": update_id, **update})
        self._new_update.set()
        self._new_update = anyio.Event()
        return update_id

    def _message(self, chat_id: int, user_id: int, **extra: Any) -> dict[str, Any]:
        return {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "group"},
            "from": {"id": user_id, "is_bot": False, "first_name": f"user{user_id}"},
            **extra,
        }

    def push_message(self, chat_id: int, user_id: int, text: str) -> int:
        return self._push({"message": self._message(chat_id, user_id, text=text)})

    def push_photo(self, chat_id: int, user_id: int, data: bytes, caption: str = "") -> int:
        file_id = f"photo{len(self.files)}"
        self.files[file_id] = data
        photo = [
            {
                "file_id": file_id,
                "file_unique_id": f"u{file_id}",
                "width": 10,
                "height": 10,
                "file_size": len(data),
            }
        ]
        return self._push(
            {"message": self._message(chat_id, user_id, photo=photo, caption=caption)}
        )

    def push_callback(self, chat_id: int, user_id: int, data: str, message_id: int = 1) -> int:
        return self._push(
            {
                "callback_query": {
                    "id": f"cb{next(self._update_ids)}",
                    "from": {"id": user_id, "is_bot": False, "first_name": f"user{user_id}"},
                    "chat_instance": "ci",
                    "data": data,
                    "message": {
                        "message_id": message_id,
                        "date": int(time.time()),
                        "chat": {"id": chat_id, "type": "private"},
                        "from": BOT,
                        "text": "Approval needed",
                    },
                }
            }
        )

    # --- what tests read ------------------------------------------------------------------------

    def messages(self, chat_id: int | str) -> list[str]:
        """The chat's bot messages, oldest first, each with its CURRENT text."""
        return [self.texts[key] for key in self._order if key[0] == str(chat_id)]

    def message_ids(self, chat_id: int | str) -> list[int]:
        """The chat's bot message ids, oldest first (as ``messages``)."""
        return [key[1] for key in self._order if key[0] == str(chat_id)]

    def sends(self, chat_id: int | str) -> list[dict[str, Any]]:
        return [
            c.params
            for c in self.recorder.of("sendMessage")
            if str(c.params.get("chat_id")) == str(chat_id)
        ]

    def keyboard(self, chat_id: int | str, message_id: int | str) -> Any:
        """The inline keyboard a message shows now (None: no buttons)."""
        return self.keyboards.get((str(chat_id), int(message_id)))

    def entities(self, chat_id: int | str, message_id: int | str) -> list[tuple[str, str]]:
        """A message's entities as (type, the text they cover), in order."""
        key = (str(chat_id), int(message_id))
        text = self.texts[key]
        return [(e.type, text[e.offset : e.offset + e.length]) for e in self.styles.get(key, [])]

    def answers(self) -> list[str]:
        """The texts of every callback answer, in order ("" for an answer without text)."""
        return [str(c.params.get("text") or "") for c in self.recorder.of("answerCallbackQuery")]

    def edits(self, chat_id: int | str) -> list[dict[str, Any]]:
        return [
            c.params
            for c in self.recorder.of("editMessageText")
            if str(c.params.get("chat_id")) == str(chat_id)
        ]

    # --- the API ---------------------------------------------------------------------------------

    async def api(self, request: Request) -> Response:
        method = request.path_params["method"]
        params = await request_params(request)
        self.recorder.record(method, params)
        fault = self.recorder.take_fault(method)
        if fault is not None:
            body: dict[str, Any] = {
                "ok": False,
                "error_code": fault.status,
                "description": fault.description,
            }
            if fault.retry_after is not None:
                body["parameters"] = {"retry_after": int(fault.retry_after)}
                body["description"] = f"Too Many Requests: retry after {int(fault.retry_after)}"
            return JSONResponse(body, fault.status)
        if "chat_id" in params:
            await self.recorder.maybe_hang(params["chat_id"])
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return JSONResponse({"ok": False, "error_code": 404, "description": "Not Found"}, 404)
        result = await handler(params)
        if isinstance(result, Response):
            return result
        return JSONResponse({"ok": True, "result": result})

    async def file(self, request: Request) -> Response:
        path = request.path_params["path"]
        data = self.files.get(path.rsplit("/", 1)[-1])
        return Response(data, 200) if data is not None else Response(status_code=404)

    async def _m_getMe(self, params: dict[str, Any]) -> Any:
        return BOT

    async def _m_setMyCommands(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_deleteWebhook(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_setWebhook(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_sendChatAction(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_answerCallbackQuery(self, params: dict[str, Any]) -> Any:
        query_id = str(params["callback_query_id"])
        if query_id in self.answered:
            return _bad_request(
                "query is too old and response timeout expired or query ID is invalid"
            )
        self.answered.add(query_id)
        return True

    async def _m_getFile(self, params: dict[str, Any]) -> Any:
        file_id = str(params["file_id"])
        data = self.files.get(file_id, b"")
        return {
            "file_id": file_id,
            "file_unique_id": f"u{file_id}",
            "file_size": len(data),
            "file_path": f"photos/{file_id}",
        }

    async def _m_getUpdates(self, params: dict[str, Any]) -> Any:
        offset = int(params.get("offset") or 0)
        # Like Telegram: an offset confirms every update below it; they are never sent again.
        self.updates = [u for u in self.updates if u["update_id"] >= offset]
        timeout = float(params.get("timeout") or 0)
        with anyio.move_on_after(timeout):
            while not self.closing and not any(u["update_id"] >= offset for u in self.updates):
                await self._new_update.wait()
        return [u for u in self.updates if u["update_id"] >= offset]

    async def _m_sendMessage(self, params: dict[str, Any]) -> Any:
        chat_id = str(params["chat_id"])
        parsed = _parsed(params)
        if isinstance(parsed, Response):
            return parsed
        message_id = next(self._message_ids)
        self.texts[(chat_id, message_id)], self.styles[(chat_id, message_id)] = parsed
        self.keyboards[(chat_id, message_id)] = params.get("reply_markup")
        self._order.append((chat_id, message_id))
        self.recorder.notify()
        return {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": {"id": int(chat_id), "type": "private"},
            "from": BOT,
            "text": self.texts[(chat_id, message_id)],
        }

    async def _m_editMessageText(self, params: dict[str, Any]) -> Any:
        key = (str(params["chat_id"]), int(params["message_id"]))
        if key not in self.texts:
            return _bad_request("message not found")
        parsed = _parsed(params)
        if isinstance(parsed, Response):
            return parsed
        markup = params.get("reply_markup")  # left out: the keyboard is removed
        current = (self.texts[key], self.styles.get(key, []))
        if current == parsed and self.keyboards.get(key) == markup:
            return _bad_request("message is not modified")
        self.texts[key], self.styles[key] = parsed
        self.keyboards[key] = markup
        self.recorder.notify()
        return {
            "message_id": key[1],
            "date": int(time.time()),
            "chat": {"id": int(key[0]), "type": "private"},
            "from": BOT,
            "text": self.texts[key],
        }

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/bot{token}/{method}", self.api, methods=["POST", "GET"]),
                Route("/file/bot{token}/{path:path}", self.file, methods=["GET"]),
            ]
        )

    def stop(self) -> None:
        self.closing = True
        self._new_update.set()
        self.recorder.release()


def _parsed(params: dict[str, Any]) -> tuple[str, list[Entity]] | Response:
    """The text a user sees and its entities, or Telegram's 400 for unparsable MarkdownV2."""
    text = str(params["text"])
    mode = params.get("parse_mode")
    if mode is None:
        return text.rstrip(), []
    if mode != "MarkdownV2":
        return _bad_request(f"unsupported parse_mode {mode!r} (the fake knows MarkdownV2)")
    try:
        shown, entities = parse(text)
    except MarkdownV2Error as err:
        return _bad_request(f"can't parse entities: {err}")
    return shown.rstrip(), entities


def _bad_request(description: str) -> JSONResponse:
    return JSONResponse(
        {"ok": False, "error_code": 400, "description": f"Bad Request: {description}"}, 400
    )


@asynccontextmanager
async def fake_telegram() -> AsyncIterator[FakeTelegram]:
    """Serve a ``FakeTelegram`` on loopback; its ``base_url`` is PTB's ``base_url``."""
    fake = FakeTelegram()
    async with serve_app(fake.app()) as root:
        fake.base_url = f"{root}/bot"
        try:
            yield fake
        finally:
            fake.stop()
