"""Telegram through python-telegram-bot against the loopback fake Bot API."""

from __future__ import annotations

from drupe.app import Runtime
from drupe.testing.fake_telegram import FakeTelegram
from tests.channels.conftest import ALICE, CHAT_A, OpenChannels, telegram_config


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
