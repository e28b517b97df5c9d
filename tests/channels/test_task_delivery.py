"""Scheduled tasks deliver through the IM channels (``drupe.app.task_delivery``): a task's
answer and its failure notice reach the subscribed chat as signed webhook messages."""

from __future__ import annotations

import logging

import pytest

from drupe.app import Runtime, task_delivery
from drupe.chunks.types import UIMessage
from drupe.streaming.listeners.base import StreamEvent, TerminalResult
from drupe.tasks.delivery import DeliveryTarget, NoDelivery
from drupe.testing.fake_platform import PlatformRecorder
from drupe.testing.loopback import serve_app
from tests.channels.conftest import OpenChannels
from tests.channels.support import drained
from tests.channels.test_webhook import receiver, webhook_config


def _done(text: str) -> TerminalResult:
    message: UIMessage = {
        "id": "m1",
        "role": "assistant",
        "parts": [{"type": "text", "text": text, "state": "done"}],
    }
    return TerminalResult(
        status="success",
        conversation_id="agent-session:s1",
        turn_id="t1",
        execution_id="e1",
        model_id="scripted:echo",
        attempt_id=1,
        anchor_message_id="m1",
        final_message=message,
        is_conversation_done=True,
    )


async def test_a_tasks_answer_and_its_failure_notice_reach_the_subscribed_chat(
    runtime: Runtime, open_channels: OpenChannels
) -> None:
    recorder = PlatformRecorder()
    async with (
        serve_app(receiver(recorder)) as root,
        open_channels(webhook_config(f"{root}/hook")) as service,
    ):
        port = task_delivery(service)
        target = DeliveryTarget(channel="hook", chat="room9")
        listener = port.listener(target, listener_id="task:r1:hook:room9")
        for seq, delta in enumerate(["The report ", "is ready."]):
            chunk = {"type": "text-delta", "id": "t1", "delta": delta}
            listener.on_chunk(
                StreamEvent(
                    conversation_id="agent-session:s1",
                    turn_id="t1",
                    execution_id="e1",
                    attempt_id=1,
                    anchor_message_id="m1",
                    seq=seq,
                    chunk=chunk,
                )
            )
        await listener.on_done(_done("The report is ready."))
        await port.send(target, "[Task failed] nightly / 3s / boom")
        await drained(service, "room9", channel="hook")
    texts = [call.params.get("text") for call in recorder.calls if call.params.get("chatId")]
    assert any("The report is ready." in str(text) for text in texts)
    assert any(str(text).startswith("[Task failed] nightly") for text in texts)
    assert recorder.of("bad-signature") == []


async def test_a_chat_of_an_unknown_channel_is_skipped_with_a_warning(
    runtime: Runtime, open_channels: OpenChannels, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = PlatformRecorder()
    async with (
        serve_app(receiver(recorder)) as root,
        open_channels(webhook_config(f"{root}/hook")) as service,
    ):
        with caplog.at_level(logging.WARNING, logger="drupe.app"):
            await task_delivery(service).send(DeliveryTarget("nope", "room1"), "hello")
    assert "task delivery to nope/room1 skipped" in caplog.text
    assert recorder.calls == []


def test_without_channels_deliveries_are_dropped() -> None:
    assert isinstance(task_delivery(None), NoDelivery)
