"""Delivery rules across a restart, approvals by button, and the agent-session target."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from drupe.agent.models.script import Text, ToolCall
from drupe.agent.models.scripted import register_script
from drupe.app import Runtime, channel_service, open_runtime
from drupe.settings import Settings
from drupe.testing.fake_driver import FakeDriver, SteerableFakeConnection
from drupe.testing.fake_telegram import FakeTelegram
from drupe.tools.base import ToolContext, ToolEntry
from tests.channels.conftest import ALICE, CHAT_A, OpenChannels, telegram_config
from tests.channels.support import STOPPED_SHOWN, drained, rows_of, text_of


async def test_a_restart_mid_answer_sends_the_terminal_text_exactly_once(
    settings: Settings, tg: FakeTelegram
) -> None:
    config = telegram_config(tg.base_url, target="model:scripted:lorem?words=200&rate=40")
    async with open_runtime(settings) as rt, channel_service(rt, [config], edit_interval=0.0):
        tg.push_message(CHAT_A, ALICE, "a long story")
        await tg.recorder.wait_until(lambda: len(tg.edits(CHAT_A)) >= 1)  # mid-answer
        confirmed = lambda: any(  # noqa: E731 - the update was confirmed to Telegram
            int(c.params.get("offset") or 0) >= 2 for c in tg.recorder.of("getUpdates")
        )
        await tg.recorder.wait_until(confirmed)
        # the channels stop first, then the runtime aborts the answer and persists it paused:
        # nothing could tell the chat; the delivery ledger says the answer is still live
    for _ in range(2):  # two restarts: the second must not send anything again
        async with open_runtime(settings) as rt, channel_service(rt, [config]) as service:
            if str(CHAT_A) in service.channels["tg"].outboxes:
                await drained(service, CHAT_A)
            rows = await rows_of(rt, CHAT_A)
    answer = rows[1]
    assert answer.status == "paused"
    partial = text_of(answer).rstrip()
    assert tg.messages(CHAT_A) == [f"{partial}\n\n{STOPPED_SHOWN}"]  # one message, finished once
    assert tg.entities(CHAT_A, tg.message_ids(CHAT_A)[0])[-1] == ("italic", STOPPED_SHOWN)
    finals = [e for e in tg.edits(CHAT_A) if e["text"].endswith("\n\n_\\(stopped\\)_")]
    assert len(finals) == 1 and finals[0]["parse_mode"] == "MarkdownV2"
    assert len(tg.sends(CHAT_A)) == 1


async def _remove(arguments: Mapping[str, Any], context: ToolContext) -> str:
    return f"removed {arguments.get('path')}"


async def test_an_approval_answered_by_a_button_continues_the_turn(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    register_script(
        "tg-approve-rm",
        [[ToolCall("rm", {"path": "/tmp/x"}, tool_call_id="call-1")], [Text("All clean.")]],
    )
    runtime.tools.register(
        ToolEntry(
            name="rm",
            description="Remove a file",
            input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
            execute=_remove,
            needs_approval=lambda args: True,
        )
    )
    config = telegram_config(tg.base_url, target="model:scripted:tg-approve-rm")
    async with open_channels(config) as service:
        tg.push_message(CHAT_A, ALICE, "clean up")
        await tg.recorder.wait_until(lambda: any("reply_markup" in s for s in tg.sends(CHAT_A)))
        prompt = next(s for s in tg.sends(CHAT_A) if "reply_markup" in s)
        buttons = prompt["reply_markup"]["inline_keyboard"][0]
        assert [b["text"] for b in buttons] == ["Approve", "Deny"]
        assert "rm" in prompt["text"]
        approve = buttons[0]["callback_data"]
        assert approve.startswith("approve:")
        tg.push_callback(CHAT_A, 999, approve)  # a stranger's press is ignored
        tg.push_callback(CHAT_A, ALICE, approve)
        await tg.recorder.wait_until(lambda: "All clean." in tg.messages(CHAT_A))
        await drained(service, CHAT_A)
        rows = await rows_of(runtime, CHAT_A)
        assert service.channels["tg"].refused == 1
    tool = next(p for p in rows[1].parts if p["type"] == "tool-rm")
    assert tool["state"] == "output-available" and tool["output"] == "removed /tmp/x"
    assert tg.messages(CHAT_A)[0].endswith("\n\n✅ Approved by user1001")
    assert sorted(tg.answers()) == ["Approved.", "You are not allowed to decide this."]


async def test_an_agent_session_target_with_a_steer_redirect(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    driver = FakeDriver("fake", steerable=True)
    assert runtime.drivers is not None
    runtime.drivers.register(driver)
    agent = await runtime.db.agents.create_agent(
        name="helper", driver_type="fake", model_id="fake-model"
    )
    config = telegram_config(tg.base_url, target=f"agent:{agent.id}")
    async with open_channels(config) as service:
        tg.push_message(CHAT_A, ALICE, "start the job")
        connection = await driver.wait_sent(1)
        assert isinstance(connection, SteerableFakeConnection)
        first = connection.sends[0]
        assert "start the job" in str(first.message["parts"][0]["text"])
        assert first.headless is False
        connection.emit_text("m1", ["working ", "on it "], complete=False)
        await tg.recorder.wait_until(lambda: len(tg.sends(CHAT_A)) >= 1)
        tg.push_message(CHAT_A, ALICE, "also check the logs")
        redirect = await connection.wait_redirects(1)
        assert "also check the logs" in str(redirect.message["parts"][0]["text"])
        connection.boundary()
        connection.emit_text("m1", ["done, ", "logs are clean"], complete=False)
        connection.complete()
        await tg.recorder.wait_until(
            lambda: any("logs are clean" in t for t in tg.messages(CHAT_A))
        )
        await drained(service, CHAT_A)
        binding = await runtime.db.channels.binding("tg", str(CHAT_A))
        assert binding is not None and binding.conversation_id.startswith("agent-session:")
        rows = await rows_of(runtime, CHAT_A)
        tg.push_message(CHAT_A, ALICE, "/new")
        await tg.recorder.wait_until(lambda: "New agent session started." in tg.messages(CHAT_A))
        fresh = await runtime.db.channels.binding("tg", str(CHAT_A))
    assert fresh is not None and fresh.conversation_id != binding.conversation_id
    assert len(driver.sent) == 1  # the steer was redirected into the live turn, not a new turn
    assistant = [r for r in rows if r.role == "assistant"]
    assert [r.status for r in assistant] == ["success", "success"]  # the boundary rolled the row
    assert "working on it" in text_of(assistant[0])
    assert "logs are clean" in text_of(assistant[1])
    steer_rows = [r for r in rows if r.role == "user" and (r.metadata or {}).get("steer")]
    assert len(steer_rows) == 1 and assistant[1].parent_id == steer_rows[0].id
    answers = [t for t in tg.messages(CHAT_A) if "working" in t or "logs" in t]
    assert answers == ["working on it", "done, logs are clean"]


async def test_an_agent_target_saves_attachments_in_its_workspace_and_compacts(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels, tmp_path: Path
) -> None:
    driver = FakeDriver("fake", steerable=True)
    assert runtime.drivers is not None
    runtime.drivers.register(driver)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    agent = await runtime.db.agents.create_agent(
        name="filer", driver_type="fake", model_id="fake-model", workspace=str(workspace)
    )
    config = telegram_config(tg.base_url, target=f"agent:{agent.id}")
    async with open_channels(config):
        tg.push_photo(CHAT_A, ALICE, b"\x89PNG-bytes", caption="file this")
        connection = await driver.wait_sent(1)
        prompt = str(connection.sends[0].message["parts"][0]["text"])
        assert "file this" in prompt and "[Attached files saved to workspace]" in prompt
        (saved,) = (workspace / ".drupe" / "channel-files").iterdir()
        assert saved.read_bytes() == b"\x89PNG-bytes" and str(saved) in prompt
        connection.emit_text("m1", ["filed"])
        await tg.recorder.wait_until(lambda: "filed" in tg.messages(CHAT_A))
        tg.push_message(CHAT_A, ALICE, "/compact")
        compact = await driver.wait_sent(2)
        assert compact.sends[-1].message["parts"][0]["text"] == "/compact"  # raw, not wrapped
