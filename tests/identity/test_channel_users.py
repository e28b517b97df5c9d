"""IM chats act as a Drupe user (issue 20, step 8): a channel's ``run_as`` (or its ``users``
table, per platform user) is whose the chats' conversations are; a disabled mapped user's chat
is refused, never answered with someone else's rights."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from drupe.admission.principal import Principal
from drupe.app import Runtime, channel_service, open_runtime
from drupe.errors import UnknownConversationError
from drupe.testing.fake_telegram import FakeTelegram, fake_telegram
from tests.channels.conftest import ALICE, CHAT_A, telegram_config
from tests.identity.conftest import PASSWORDS, auth_settings

OTHER_PLATFORM_USER = 424242


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    async with open_runtime(auth_settings(tmp_path)) as rt:  # auth on
        for name in ("alice", "bob", "carol"):
            await rt.db.users.create(name, password=PASSWORDS.get(name, "carol-password-4"))
        yield rt


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with fake_telegram() as fake:
        yield fake


async def _principal(runtime: Runtime, name: str) -> Principal:
    user = await runtime.db.users.get_by_name(name)
    assert user is not None
    return Principal(user_id=user.id, name=user.name, role=user.role)


async def test_a_channels_chats_are_its_run_as_users(runtime: Runtime, tg: FakeTelegram) -> None:
    config = telegram_config(tg.base_url, run_as="alice")
    async with channel_service(runtime, [config], edit_interval=0.0) as service:
        tg.push_message(CHAT_A, ALICE, "hello there")
        await tg.recorder.wait_until(lambda: any("hello there" in t for t in tg.messages(CHAT_A)))
        await service.channels["tg"].outboxes[str(CHAT_A)].wait_idle()
    binding = await runtime.db.channels.binding("tg", str(CHAT_A))
    assert binding is not None
    record = await runtime.db.conversations.get(binding.conversation_id)
    assert record is not None and record.owner_id == (await _principal(runtime, "alice")).user_id
    alice_rows = await runtime.conversations.messages(
        await _principal(runtime, "alice"), binding.conversation_id
    )
    assert [r.role for r in alice_rows] == ["user", "assistant"]
    with pytest.raises(UnknownConversationError):
        await runtime.conversations.messages(
            await _principal(runtime, "bob"), binding.conversation_id
        )


async def test_a_platform_user_maps_to_their_own_drupe_user(
    runtime: Runtime, tg: FakeTelegram
) -> None:
    config = telegram_config(
        tg.base_url,
        run_as="alice",
        users={str(ALICE): "carol"},
        allowed_users=[str(ALICE), str(OTHER_PLATFORM_USER)],
    )
    async with channel_service(runtime, [config], edit_interval=0.0) as service:
        tg.push_message(CHAT_A, ALICE, "mapped")
        await tg.recorder.wait_until(lambda: any("mapped" in t for t in tg.messages(CHAT_A)))
        await service.channels["tg"].outboxes[str(CHAT_A)].wait_idle()
    binding = await runtime.db.channels.binding("tg", str(CHAT_A))
    assert binding is not None
    record = await runtime.db.conversations.get(binding.conversation_id)
    assert record is not None and record.owner_id == (await _principal(runtime, "carol")).user_id


async def test_a_disabled_mapped_user_is_refused(runtime: Runtime, tg: FakeTelegram) -> None:
    await runtime.db.users.set_disabled("alice")
    config = telegram_config(tg.base_url, run_as="alice")
    async with channel_service(runtime, [config], edit_interval=0.0) as service:
        tg.push_message(CHAT_A, ALICE, "let me in")
        await tg.recorder.wait_until(lambda: any("disabled" in t for t in tg.messages(CHAT_A)))
        await service.channels["tg"].outboxes[str(CHAT_A)].wait_idle()
    binding = await runtime.db.channels.binding("tg", str(CHAT_A))
    if binding is not None:  # bound, but nothing was answered or stored as a turn
        assert await runtime.db.messages.list_for_conversation(binding.conversation_id) == []
