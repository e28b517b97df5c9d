"""Helpers for the channel tests (event-driven: no polling sleeps)."""

from __future__ import annotations

import anyio

from drupe.app import Runtime
from drupe.channels.service import ChannelService
from drupe.persistence.records import MessageRecord

STOPPED_SHOWN = "(stopped)"
"""What a Telegram user sees of the stopped mark ``_(stopped)_``: "(stopped)", in italics."""


async def conversation_of(runtime: Runtime, chat_id: int | str, channel: str = "tg") -> str:
    binding = await runtime.db.channels.binding(channel, str(chat_id))
    assert binding is not None, f"chat {chat_id} has no binding"
    return binding.conversation_id


async def rows_of(runtime: Runtime, chat_id: int | str, channel: str = "tg") -> list[MessageRecord]:
    conversation_id = await conversation_of(runtime, chat_id, channel)
    await runtime.manager.wait_settled(conversation_id)
    return await runtime.db.messages.list_for_conversation(conversation_id)


async def drained(service: ChannelService, chat_id: int | str, channel: str = "tg") -> None:
    outbox = service.channels[channel].outboxes[str(chat_id)]
    with anyio.fail_after(20):
        await outbox.wait_idle()


def text_of(row: MessageRecord) -> str:
    return "".join(str(p.get("text", "")) for p in row.parts if p.get("type") == "text")
