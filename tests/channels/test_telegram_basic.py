"""Telegram through python-telegram-bot against the loopback fake Bot API."""

from __future__ import annotations

import base64
import logging

import httpx
import pytest

from drupe.api.app_factory import create_app
from drupe.app import Runtime
from drupe.channels.delivery_listener import ChatDelivery
from drupe.testing.fake_telegram import FakeTelegram
from tests.channels.conftest import (
    ALICE,
    CHAT_A,
    ENV,
    TG_TOKEN,
    OpenChannels,
    telegram_config,
)


async def test_a_message_is_answered_in_one_edited_message(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    async with open_channels(telegram_config(tg.base_url)) as service:
        tg.push_message(CHAT_A, ALICE, "hello there")
        await tg.recorder.wait_until(lambda: any("hello there" in t for t in tg.messages(CHAT_A)))
        channel = service.channels["tg"]
        await channel.outboxes[str(CHAT_A)].wait_idle()
        assert channel.state == "connected"
    texts = tg.messages(CHAT_A)
    assert len(texts) == 1
    assert "hello there" in texts[0]
    binding = await runtime.db.channels.binding("tg", str(CHAT_A))
    assert binding is not None
    rows = await runtime.db.messages.list_for_conversation(binding.conversation_id)
    assert [r.role for r in rows] == ["user", "assistant"]
    assert rows[1].status == "success"


async def test_webhook_mode_checks_the_secret_token(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    config = telegram_config(
        tg.base_url,
        mode="webhook",
        secret_env="HOOK_SECRET",
        public_url="https://drupe.example",
    )
    async with open_channels(config) as service:
        (hook,) = tg.recorder.of("setWebhook")
        assert hook.params["url"] == "https://drupe.example/channels/tg/telegram"
        assert hook.params["secret_token"] == ENV["HOOK_SECRET"]
        assert tg.recorder.of("getUpdates") == []  # no polling in webhook mode
        runtime.channels = service
        transport = httpx.ASGITransport(create_app(runtime))
        update = {
            "update_id": 77,
            "message": {
                "message_id": 9,
                "date": 1700000000,
                "chat": {"id": CHAT_A, "type": "private"},
                "from": {"id": ALICE, "is_bot": False, "first_name": "Alice"},
                "text": "via webhook",
            },
        }
        async with httpx.AsyncClient(transport=transport, base_url="http://drupe.test") as c:
            bad = await c.post(
                "/channels/tg/telegram",
                json=update,
                headers={"X-Telegram-Bot-Api-Secret-Token": "guess"},
            )
            assert bad.status_code == 401
            assert await runtime.db.channels.binding("tg", str(CHAT_A)) is None
            good = await c.post(
                "/channels/tg/telegram",
                json=update,
                headers={"X-Telegram-Bot-Api-Secret-Token": ENV["HOOK_SECRET"]},
            )
            assert good.status_code == 200
            await tg.recorder.wait_until(
                lambda: any("via webhook" in t for t in tg.messages(CHAT_A))
            )
        runtime.channels = None


async def test_deliver_port_sends_once_per_delivery_id(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    async with open_channels(telegram_config(tg.base_url)) as service:
        port: ChatDelivery = service
        first = port.deliver(
            "tg",
            str(CHAT_A),
            "Task done: 3 files. key sk-proj-aaaaaaaaaaaaaaaaaaaaaaaa",
            delivery_id="run-1:chat",
        )
        again = port.deliver("tg", str(CHAT_A), "Task done: 3 files.", delivery_id="run-1:chat")
        assert first == again == "run-1:chat"
        await tg.recorder.wait_until(lambda: len(tg.messages(CHAT_A)) == 1)
        await service.channels["tg"].outboxes[str(CHAT_A)].wait_idle()
    async with open_channels(telegram_config(tg.base_url)) as service:  # after a restart too
        service.deliver("tg", str(CHAT_A), "Task done: 3 files.", delivery_id="run-1:chat")
        await service.channels["tg"].outboxes[str(CHAT_A)].wait_idle()
    assert tg.messages(CHAT_A) == ["Task done: 3 files. key [REDACTED]"]


async def test_the_bot_token_never_reaches_a_log_record(
    runtime: Runtime,
    tg: FakeTelegram,
    open_channels: OpenChannels,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    tg.recorder.fail_next("sendMessage", 400, description=f"Bad Request: echo {TG_TOKEN}")
    async with open_channels(telegram_config(tg.base_url)) as service:
        tg.push_message(CHAT_A, ALICE, "log me")
        await tg.recorder.wait_until(lambda: len(tg.sends(CHAT_A)) >= 2)
        await service.channels["tg"].outboxes[str(CHAT_A)].wait_idle()
        last_error = service.channels["tg"].last_error
    assert any("HTTP Request" in r.getMessage() for r in caplog.records)  # httpx did log URLs
    assert all(TG_TOKEN not in r.getMessage() for r in caplog.records)
    assert last_error is not None and TG_TOKEN not in last_error and "[REDACTED]" in last_error


async def test_attachments_become_file_parts_and_oversized_ones_are_refused(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    config = telegram_config(tg.base_url, max_attachment_bytes=1000)
    async with open_channels(config) as service:
        tg.push_photo(CHAT_A, ALICE, b"\x89PNG-small", caption="look at this")
        await tg.recorder.wait_until(lambda: any("look at this" in t for t in tg.messages(CHAT_A)))
        tg.push_photo(CHAT_A, ALICE, b"x" * 1001, caption="and this big one")
        await tg.recorder.wait_until(
            lambda: (
                any("larger than 1000 bytes" in t for t in tg.messages(CHAT_A))
                and any("and this big one" in t for t in tg.messages(CHAT_A))
            )
        )
        await service.channels["tg"].outboxes[str(CHAT_A)].wait_idle()
        binding = await runtime.db.channels.binding("tg", str(CHAT_A))
        assert binding is not None
        await runtime.manager.wait_settled(binding.conversation_id)
        rows = await runtime.db.messages.list_for_conversation(binding.conversation_id)
    first = rows[0]
    (file_part,) = [p for p in first.parts if p["type"] == "file"]
    assert file_part["mediaType"] == "image/jpeg"
    assert (
        file_part["url"] == "data:image/jpeg;base64," + base64.b64encode(b"\x89PNG-small").decode()
    )
    # the big photo was never downloaded: only the small one's file was fetched
    assert len(tg.recorder.of("getFile")) == 1
    user_rows = [r for r in rows if r.role == "user"]
    assert "and this big one" in str(user_rows[-1].parts[0]["text"])
    assert all(p["type"] != "file" for p in user_rows[-1].parts)
