"""The inbound pipeline and the outbound listener, end to end through the real Telegram SDK
(python-telegram-bot) against the loopback fake Bot API, with the real manager and SQLite."""

from __future__ import annotations

import anyio

from drupe.agent.models.scripted import lorem
from drupe.app import Runtime
from drupe.channels.config import parse_channel_configs
from drupe.testing.clock import ManualClock
from drupe.testing.fake_telegram import FakeTelegram
from tests.channels.conftest import (
    ALICE,
    CHAT_A,
    CHAT_B,
    TG_TOKEN,
    OpenChannels,
    telegram_config,
)
from tests.channels.support import STOPPED_SHOWN, conversation_of, drained, rows_of, text_of

SLOW = "model:scripted:lorem?words=60&rate=40"


async def test_a_burst_is_merged_into_one_turn_after_the_debounce(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    clock = ManualClock()
    config = telegram_config(tg.base_url, debounce=8)
    async with open_channels(config, clock=clock) as service:
        for text in ("first line", "second line", "third line"):
            tg.push_message(CHAT_A, ALICE, text)
        workers = service.channels["tg"].workers
        await clock.wait_until(
            lambda: str(CHAT_A) in workers and workers[str(CHAT_A)].burst_size == 3
        )
        await clock.wait_for_sleepers(1)
        # Three messages arrived; the burst timer is armed: nothing is dispatched before it ends.
        assert await runtime.db.channels.binding("tg", str(CHAT_A)) is None
        clock.advance(7.9)
        assert await runtime.db.channels.binding("tg", str(CHAT_A)) is None
        clock.advance(0.2)
        await tg.recorder.wait_until(lambda: len(tg.messages(CHAT_A)) == 1)
        await drained(service, CHAT_A)
        rows = await rows_of(runtime, CHAT_A)
    assert [r.role for r in rows] == ["user", "assistant"]  # ONE turn
    user_text = text_of(rows[0])
    merged = "first line\nsecond line\nthird line"
    assert merged in user_text
    assert user_text.startswith("[SECURITY NOTICE")  # untrusted wrapping
    assert merged in tg.messages(CHAT_A)[0]


async def test_queue_order_is_kept_per_chat_and_chats_do_not_mix(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    config = telegram_config(tg.base_url, allowed_chats=[str(CHAT_B)])
    async with open_channels(config) as service:
        tg.push_message(CHAT_A, ALICE, "a-one")
        tg.push_message(CHAT_B, 2002, "b-one")
        tg.push_message(CHAT_A, ALICE, "a-two")
        tg.push_message(CHAT_B, 2002, "b-two")
        await tg.recorder.wait_until(
            lambda: all(
                any(f"{c}-two" in t for t in tg.messages(chat))
                for c, chat in (("a", CHAT_A), ("b", CHAT_B))
            )
        )
        await drained(service, CHAT_A)
        await drained(service, CHAT_B)
        rows_a = await rows_of(runtime, CHAT_A)
        rows_b = await rows_of(runtime, CHAT_B)
    assert await conversation_of(runtime, CHAT_A) != await conversation_of(runtime, CHAT_B)
    users_a = [text_of(r) for r in rows_a if r.role == "user"]
    users_b = [text_of(r) for r in rows_b if r.role == "user"]
    assert ["a-one" in users_a[0], "a-two" in users_a[1]] == [True, True]
    assert ["b-one" in users_b[0], "b-two" in users_b[1]] == [True, True]
    assert all("b-" not in t for t in tg.messages(CHAT_A))
    assert all("a-" not in t for t in tg.messages(CHAT_B))


async def test_a_message_mid_answer_steers_and_is_answered_after_it(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    async with open_channels(telegram_config(tg.base_url, target=SLOW)) as service:
        tg.push_message(CHAT_A, ALICE, "tell me a story")
        await tg.recorder.wait_until(lambda: len(tg.sends(CHAT_A)) >= 1)  # answer is streaming
        conversation_id = await conversation_of(runtime, CHAT_A)
        assert runtime.manager.is_live(conversation_id)
        tg.push_message(CHAT_A, ALICE, "make it shorter")
        final = lorem(60)
        await tg.recorder.wait_until(lambda: tg.messages(CHAT_A).count(final) == 2, within=20)
        await drained(service, CHAT_A)
        rows = await rows_of(runtime, CHAT_A)
    assert [(r.role, r.status) for r in rows] == [
        ("user", "success"),
        ("assistant", "success"),
        ("user", "success"),
        ("assistant", "success"),
    ]
    steer = rows[2]
    assert "make it shorter" in text_of(steer) and (steer.metadata or {}).get("steer") is True
    assert rows[3].parent_id == steer.id
    assert tg.messages(CHAT_A) == [final, final]  # one platform message per answer, no dupes
    typing = tg.recorder.of("sendChatAction")
    assert typing and all(c.params["action"] == "typing" for c in typing)


async def test_stop_mid_answer_keeps_the_partial_and_ends_stopped(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    async with open_channels(telegram_config(tg.base_url, target=SLOW)) as service:
        tg.push_message(CHAT_A, ALICE, "go on")
        await tg.recorder.wait_until(lambda: len(tg.sends(CHAT_A)) >= 1)
        tg.push_message(CHAT_A, ALICE, "/stop")
        await tg.recorder.wait_until(
            lambda: any(m.endswith(STOPPED_SHOWN) for m in tg.messages(CHAT_A))
        )
        await drained(service, CHAT_A)
        rows = await rows_of(runtime, CHAT_A)
        tg.push_message(CHAT_A, ALICE, "/stop")  # nothing is answering now
        await tg.recorder.wait_until(lambda: "Nothing to stop." in tg.messages(CHAT_A))
    answer = rows[1]
    assert answer.status == "paused"
    partial = text_of(answer)
    assert partial and partial != lorem(60)
    messages = tg.messages(CHAT_A)
    # Issue 23.8: the stopped answer's mark is the one reply (no extra "Stopped.").
    assert messages == [f"{partial.rstrip()}\n\n{STOPPED_SHOWN}", "Nothing to stop."]


async def test_edits_of_a_long_answer_are_bounded_by_the_throttle(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    clock = ManualClock()
    words = 600
    config = telegram_config(tg.base_url, target=f"model:scripted:lorem?words={words}")
    async with open_channels(config, clock=clock, edit_interval=1.0) as service:
        tg.push_message(CHAT_A, ALICE, "a long one please")
        await tg.recorder.wait_until(lambda: len(tg.sends(CHAT_A)) >= 1)
        conversation_id = await conversation_of(runtime, CHAT_A)
        await runtime.manager.wait_settled(conversation_id)  # the stream never waited for us
        rows = await rows_of(runtime, CHAT_A)
        final = text_of(rows[1])
        outbox = service.channels["tg"].outboxes[str(CHAT_A)]

        async def tick() -> None:  # one virtual second each time the pump waits its turn
            while True:
                await clock.wait_until(lambda: outbox.throttled, within=30)
                clock.advance(1.0)
                await clock.wait_until(lambda: not outbox.throttled, within=30)

        async with anyio.create_task_group() as tg_:
            tg_.start_soon(tick)
            await tg.recorder.wait_until(lambda: tg.messages(CHAT_A) == [final])
            tg_.cancel_scope.cancel()
        elapsed = clock.now()
    calls = len(tg.sends(CHAT_A)) + len(tg.edits(CHAT_A))
    assert len(final.split()) == words  # 600 deltas streamed
    assert calls <= 1 + elapsed / 1.0 + 1
    assert calls <= 4
    assert tg.messages(CHAT_A) == [final]


async def test_a_long_answer_is_split_at_the_platform_limit(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    config = telegram_config(tg.base_url, target="model:scripted:lorem?words=1500")
    async with open_channels(config) as service:
        tg.push_message(CHAT_A, ALICE, "everything")
        await tg.recorder.wait_until(lambda: len(tg.messages(CHAT_A)) >= 3)
        await drained(service, CHAT_A)
        rows = await rows_of(runtime, CHAT_A)
    final = text_of(rows[1])
    assert len(final) > 2 * 4096
    pieces = tg.messages(CHAT_A)
    assert all(len(p) <= 4096 for p in pieces)
    assert len(pieces) == 3
    assert " ".join(pieces).split() == final.split()  # no word cut, nothing lost
    assert all(not p.startswith(" ") and not p.endswith(" ") for p in pieces)


async def test_an_error_ends_with_the_error_message(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    config = telegram_config(tg.base_url, target="model:scripted:error?status=400")
    async with open_channels(config) as service:
        tg.push_message(CHAT_A, ALICE, "fail please")
        await tg.recorder.wait_until(lambda: len(tg.messages(CHAT_A)) >= 1)
        await drained(service, CHAT_A)
        rows = await rows_of(runtime, CHAT_A)
    assert rows[1].status == "error"
    (message,) = tg.messages(CHAT_A)
    assert message.startswith("Error: ")
    assert "scripted provider error" in message


async def test_an_unknown_user_is_refused_once_and_nothing_is_dispatched(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    async with open_channels(telegram_config(tg.base_url)) as service:
        tg.push_message(7777, 999, "let me in")
        tg.push_message(7777, 999, "please")
        tg.push_message(CHAT_A, ALICE, "marker")  # an allowed chat, to know both were read
        await tg.recorder.wait_until(lambda: len(tg.messages(CHAT_A)) == 1)
        await drained(service, 7777)
        channel = service.channels["tg"]
        assert channel.refused == 2
    (refusal,) = tg.messages(7777)
    assert "999" in refusal and "7777" in refusal and "allowed_users" in refusal
    assert await runtime.db.channels.binding("tg", "7777") is None
    assert len(await runtime.db.conversations.list()) == 1  # only the allowed chat's


async def test_a_429_is_waited_out_then_delivered_once(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    tg.recorder.fail_next("sendMessage", 429, retry_after=1)
    async with open_channels(telegram_config(tg.base_url)) as service:
        tg.push_message(CHAT_A, ALICE, "ping after a limit")
        await tg.recorder.wait_until(lambda: len(tg.messages(CHAT_A)) == 1)
        await drained(service, CHAT_A)
        assert service.channels["tg"].last_error is None
    assert len(tg.recorder.of("sendMessage")) == 2  # the 429, then the retry
    (message,) = tg.messages(CHAT_A)
    assert "ping after a limit" in message


async def test_a_hanging_platform_blocks_neither_the_stream_nor_other_chats(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    config = telegram_config(tg.base_url, allowed_chats=[str(CHAT_B)])
    tg.recorder.hang(str(CHAT_A))
    async with open_channels(config, send_timeout=30) as service:
        tg.push_message(CHAT_A, ALICE, "into the void")
        tg.push_message(CHAT_B, 2002, "still here")
        await tg.recorder.wait_until(lambda: len(tg.messages(CHAT_B)) == 1)
        await drained(service, CHAT_B)
        # chat A's send hangs, yet its answer was streamed and persisted
        rows = await rows_of(runtime, CHAT_A)
        assert rows[1].status == "success" and "into the void" in text_of(rows[1])
        assert tg.messages(CHAT_A) == []
        tg.recorder.release()
        await tg.recorder.wait_until(lambda: len(tg.messages(CHAT_A)) == 1)
    assert "still here" in tg.messages(CHAT_B)[0]


async def test_a_send_that_times_out_is_reported_and_not_retried(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    tg.recorder.hang(str(CHAT_A))
    async with open_channels(telegram_config(tg.base_url), send_timeout=0.3) as service:
        tg.push_message(CHAT_A, ALICE, "hello?")
        await tg.recorder.wait_until(lambda: len(tg.sends(CHAT_A)) >= 1)
        await drained(service, CHAT_A)
        channel = service.channels["tg"]
        assert channel.last_error is not None and "did not answer within" in channel.last_error
        attempts = len(tg.sends(CHAT_A))  # the live message, then the terminal text: once each
        assert attempts == 2
        tg.recorder.release()
        tg.push_message(CHAT_A, ALICE, "and now?")
        await tg.recorder.wait_until(lambda: any("and now?" in t for t in tg.messages(CHAT_A)))
        await drained(service, CHAT_A)
    # the platform came back: only the new answer was sent, the timed-out one never again
    assert len(tg.sends(CHAT_A)) == attempts + 1


async def test_commands_help_whoami_status_model_and_new(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    async with open_channels(telegram_config(tg.base_url)) as service:
        for command in ("/help", "/whoami", "/status", "/model", "/model nope:missing"):
            tg.push_message(CHAT_A, ALICE, command)
        await tg.recorder.wait_until(lambda: len(tg.messages(CHAT_A)) == 5)
        help_, whoami, status, model, refused = tg.messages(CHAT_A)
        assert all(
            f"/{c}" in help_ for c in ("new", "stop", "compact", "model", "status", "whoami")
        )
        assert str(ALICE) in whoami and str(CHAT_A) in whoami
        assert "No conversation yet" in status
        assert model == "Model: scripted:echo"
        assert refused.startswith("⚠️") and "nope:missing" in refused
        tg.push_message(CHAT_A, ALICE, "/model scripted:lorem?words=3")
        tg.push_message(CHAT_A, ALICE, "hello")
        await tg.recorder.wait_until(lambda: "Lorem ipsum dolor." in tg.messages(CHAT_A))
        first = await conversation_of(runtime, CHAT_A)
        tg.push_message(CHAT_A, ALICE, "/new")
        tg.push_message(CHAT_A, ALICE, "/status")
        await tg.recorder.wait_until(lambda: "Conversation: " in tg.messages(CHAT_A)[-1])
        await drained(service, CHAT_A)
        second = await conversation_of(runtime, CHAT_A)
    assert second != first
    assert "New conversation started." in tg.messages(CHAT_A)
    assert f"Conversation: {second}" in tg.messages(CHAT_A)[-1]
    assert "model:scripted:lorem?words=3" in tg.messages(CHAT_A)[-1]  # /new keeps the model


async def test_the_per_chat_rate_limit_refuses_a_flood(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    async with open_channels(telegram_config(tg.base_url, rate_limit=2)) as service:
        for i in range(4):
            tg.push_message(CHAT_A, ALICE, f"flood {i}")
        await tg.recorder.wait_until(
            lambda: any("Too many messages" in t for t in tg.messages(CHAT_A))
        )
        await tg.recorder.wait_until(lambda: sum("flood" in t for t in tg.messages(CHAT_A)) == 2)
        await drained(service, CHAT_A)
        rows = await rows_of(runtime, CHAT_A)
    users = [text_of(r) for r in rows if r.role == "user"]
    assert len(users) == 2 and "flood 0" in users[0] and "flood 1" in users[1]
    assert sum("Too many messages" in t for t in tg.messages(CHAT_A)) == 1  # one notice


async def test_every_configured_secret_is_hidden_on_every_channel(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    """Issue 23.8: a channel redacts the other channels' secrets too."""
    other_secret = "another-channels-hmac-secret-0123456789"
    hook = parse_channel_configs(
        {
            "channels": {
                "hook": {
                    "type": "webhook",
                    "secret_env": "HOOK_SECRET",
                    "url": "http://127.0.0.1:9/x",
                    "target": "model:scripted:echo",
                }
            }
        },
        {"HOOK_SECRET": other_secret},
    )[0]
    async with open_channels(telegram_config(tg.base_url), hook) as service:
        shown = service.get("tg").redact(f"leaked: {other_secret} and {TG_TOKEN}")
    assert other_secret not in shown and TG_TOKEN not in shown
