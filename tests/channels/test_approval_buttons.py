"""Approval buttons once decided (issue 23.5): on Telegram, Slack and the signed webhook, through
the real SDKs against loopback fakes. A decision, from the chat or from the HTTP API, replaces
the buttons by the decision; a stale press is answered "already decided" and acts no more."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

import httpx
import orjson

from drupe.agent.models.script import Text, ToolCall
from drupe.agent.models.scripted import register_script
from drupe.api.app_factory import create_app
from drupe.app import Runtime
from drupe.channels.approvals import ApprovalBoard, Verdict
from drupe.testing.fake_platform import PlatformRecorder
from drupe.testing.fake_slack import FakeSlack, signed_request
from drupe.testing.fake_telegram import FakeTelegram
from drupe.testing.loopback import serve_app
from drupe.tools.base import ToolContext, ToolEntry
from tests.channels.conftest import ALICE, CHAT_A, OpenChannels, telegram_config
from tests.channels.support import conversation_of, drained, rows_of
from tests.channels.test_slack import SECRET as SLACK_SECRET
from tests.channels.test_slack import URL as SLACK_URL
from tests.channels.test_slack import event, slack_config
from tests.channels.test_webhook import receiver, signed, webhook_config

PROMPT = "Approval needed: `rm` with `{'path': '/tmp/x'}`"
PROMPT_SHOWN = "Approval needed: rm with {'path': '/tmp/x'}"
"""What a Telegram user sees of ``PROMPT`` (MarkdownV2: the backticks make code)."""


def rm_tool(runtime: Runtime, script: str, answer: str) -> list[str]:
    """A scripted model that calls ``rm`` (approval needed), then answers ``answer``; returns
    the list of the tool's runs."""
    runs: list[str] = []

    async def remove(arguments: Mapping[str, Any], context: ToolContext) -> str:
        runs.append(str(arguments.get("path")))
        return f"removed {arguments.get('path')}"

    register_script(
        script, [[ToolCall("rm", {"path": "/tmp/x"}, tool_call_id="call-1")], [Text(answer)]]
    )
    runtime.tools.register(
        ToolEntry(
            name="rm",
            description="Remove a file",
            input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
            execute=remove,
            needs_approval=lambda args: True,
        )
    )
    return runs


async def _telegram_prompt(tg: FakeTelegram) -> tuple[int, str]:
    """The approval prompt's message id and its Approve button's data."""
    await tg.recorder.wait_until(lambda: any("reply_markup" in s for s in tg.sends(CHAT_A)))
    index = next(i for i, s in enumerate(tg.sends(CHAT_A)) if "reply_markup" in s)
    keyboard = tg.sends(CHAT_A)[index]["reply_markup"]["inline_keyboard"][0]
    assert [b["text"] for b in keyboard] == ["Approve", "Deny"]
    return tg.message_ids(CHAT_A)[index], str(keyboard[0]["callback_data"])


async def test_telegram_a_double_tap_and_a_later_press_act_once(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    runs = rm_tool(runtime, "tg-approve-once", "All clean.")
    config = telegram_config(tg.base_url, target="model:scripted:tg-approve-once")
    async with open_channels(config) as service:
        tg.push_message(CHAT_A, ALICE, "clean up")
        message_id, approve = await _telegram_prompt(tg)
        assert approve.startswith("approve:")
        tg.push_callback(CHAT_A, 999, approve, message_id)  # a stranger's press is refused
        tg.push_callback(CHAT_A, ALICE, approve, message_id)  # a double tap
        tg.push_callback(CHAT_A, ALICE, approve, message_id)
        await tg.recorder.wait_until(lambda: "All clean." in tg.messages(CHAT_A))
        await drained(service, CHAT_A)
        rows = await rows_of(runtime, CHAT_A)
        deny = approve.replace("approve:", "deny:")
        tg.push_callback(CHAT_A, ALICE, deny, message_id)  # later, the other way
        await tg.recorder.wait_until(lambda: len(tg.answers()) == 4)
        await drained(service, CHAT_A)
        later = await rows_of(runtime, CHAT_A)
    assert runs == ["/tmp/x"]
    assert len(rows) == len(later) == 2  # one continuation, one answer row
    assert tg.messages(CHAT_A) == [f"{PROMPT_SHOWN}\n\n✅ Approved by user1001", "All clean."]
    assert tg.entities(CHAT_A, message_id) == [("code", "rm"), ("code", "{'path': '/tmp/x'}")]
    assert tg.keyboard(CHAT_A, message_id) is None  # the buttons are gone
    assert len(tg.sends(CHAT_A)) == 2  # no "Approved." message, the answer once
    assert sorted(tg.answers()) == sorted(
        [
            "You are not allowed to decide this.",
            "Approved.",
            "Already decided: approved by user1001.",
            "Already decided: approved by user1001.",
        ]
    )


async def test_telegram_buttons_follow_a_decision_made_through_the_http_api(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    runs = rm_tool(runtime, "tg-deny-api", "Left it.")
    config = telegram_config(tg.base_url, target="model:scripted:tg-deny-api")
    async with open_channels(config) as service:
        runtime.channels = service
        tg.push_message(CHAT_A, ALICE, "clean up")
        message_id, approve = await _telegram_prompt(tg)
        conversation_id = await conversation_of(runtime, CHAT_A)
        await runtime.manager.wait_settled(conversation_id)
        transport = httpx.ASGITransport(create_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://drupe.test") as c:
            decision = {"approvalId": approve.removeprefix("approve:"), "approved": False}
            r = await c.post(
                f"/api/chat/{conversation_id}/approvals", json={"decisions": [decision]}
            )
            assert r.status_code == 200 and r.json()["continued"] is True
        await tg.recorder.wait_until(lambda: "Left it." in tg.messages(CHAT_A))
        await drained(service, CHAT_A)
        tg.push_callback(CHAT_A, ALICE, approve, message_id)  # a stale press in the chat
        await tg.recorder.wait_until(lambda: len(tg.answers()) == 1)
        await drained(service, CHAT_A)
        rows = await rows_of(runtime, CHAT_A)
        runtime.channels = None
    assert runs == []
    assert tg.messages(CHAT_A) == [f"{PROMPT_SHOWN}\n\n❌ Denied", "Left it."]
    assert tg.keyboard(CHAT_A, message_id) is None
    assert tg.answers() == ["Already decided: denied."]
    tool = next(p for p in rows[1].parts if p["type"] == "tool-rm")
    assert tool["state"] == "output-denied"


async def test_slack_buttons_are_replaced_and_a_stale_press_gets_an_ephemeral_answer(
    runtime: Runtime, slack: FakeSlack, open_channels: OpenChannels
) -> None:
    runs = rm_tool(runtime, "sl-approve-once", "Slack clean.")
    config = slack_config(slack.base_url, target="model:scripted:sl-approve-once")
    async with open_channels(config) as service:
        runtime.channels = service
        transport = httpx.ASGITransport(create_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://drupe.test") as c:
            ts = "1700000001.000200"
            await c.post(
                SLACK_URL, **signed_request(SLACK_SECRET, event("tidy", event_id="Ev1", ts=ts))
            )
            posts = lambda: slack.recorder.of("chat.postMessage")  # noqa: E731
            await slack.recorder.wait_until(lambda: any("blocks" in p.params for p in posts()))
            prompt = next(p.params for p in posts() if "blocks" in p.params)
            message_ts = next(t for t, b in slack.message_blocks.items() if b)
            value = prompt["blocks"][1]["elements"][0]["value"]

            def press(action_ts: str) -> dict[str, Any]:
                payload = {
                    "type": "block_actions",
                    "team": {"id": "T1"},
                    "user": {"id": "U1", "username": "ann"},
                    "api_app_id": "A1",
                    "channel": {"id": "C1"},
                    "message": {"ts": message_ts, "thread_ts": ts},
                    "actions": [
                        {
                            "action_id": "approve",
                            "block_id": "b1",
                            "type": "button",
                            "value": value,
                            "action_ts": action_ts,
                        }
                    ],
                    "trigger_id": "t1",
                }
                form = urlencode({"payload": orjson.dumps(payload).decode()})
                return signed_request(SLACK_SECRET, form=form)

            assert (await c.post(SLACK_URL, **press("1700000010.1"))).status_code == 200
            assert (await c.post(SLACK_URL, **press("1700000010.2"))).status_code == 200
            await slack.recorder.wait_until(lambda: "Slack clean." in slack.messages("C1"))
            await slack.recorder.wait_until(lambda: len(slack.ephemerals()) == 2)
            await drained(service, f"C1:{ts}", channel="sl")
        runtime.channels = None
    assert runs == ["/tmp/x"]
    settled = f"{PROMPT}\n\n✅ Approved by ann"
    assert slack.messages("C1") == [settled, "Slack clean."]
    assert slack.blocks(message_ts) == [
        {"type": "section", "text": {"type": "mrkdwn", "text": settled}}
    ]
    assert slack.ephemerals() == [
        ("U1", "Approved."),
        ("U1", "Already decided: approved by ann."),
    ]


async def test_webhook_buttons_are_removed_and_a_stale_press_is_answered(
    runtime: Runtime, open_channels: OpenChannels
) -> None:
    runs = rm_tool(runtime, "hook-approve-once", "Hook clean.")
    recorder = PlatformRecorder()
    async with serve_app(receiver(recorder)) as root:
        config = replace(
            webhook_config(f"{root}/hook", target="model:scripted:hook-approve-once"),
            headless=False,
        )
        async with open_channels(config) as service:
            runtime.channels = service
            transport = httpx.ASGITransport(create_app(runtime))
            async with httpx.AsyncClient(transport=transport, base_url="http://drupe.test") as c:
                url = "/channels/hook/webhook"
                message = {"type": "message", "chatId": "r3", "userId": "u1", "text": "rm it"}
                assert (await c.post(url, **signed(message))).status_code == 202
                offers = lambda: [s for s in recorder.of("send") if s.params["buttons"]]  # noqa: E731
                await recorder.wait_until(lambda: bool(offers()))
                offer = offers()[0].params
                data = offer["buttons"][0]["data"]
                for n in (1, 2):
                    button = {"type": "button", "chatId": "r3", "userId": "u1", "data": data}
                    press = {**button, "userName": "Ann", "eventId": f"press-{n}"}
                    assert (await c.post(url, **signed(press))).status_code == 202
                texts = lambda: [str(call.params.get("text")) for call in recorder.calls]  # noqa: E731
                await recorder.wait_until(lambda: "Hook clean." in texts())
                await recorder.wait_until(lambda: len(recorder.of("answer")) == 2)
                await drained(service, "r3", channel="hook")
            runtime.channels = None
    assert runs == ["/tmp/x"]
    edits = [e.params for e in recorder.of("edit") if e.params["messageId"] == offer["messageId"]]
    assert edits == [
        {
            "type": "edit",
            "chatId": "r3",
            "messageId": offer["messageId"],
            "text": f"{PROMPT}\n\n✅ Approved by Ann",
            "buttons": [],
        }
    ]
    answers = [(a.params["eventId"], a.params["text"]) for a in recorder.of("answer")]
    assert answers == [("press-1", "Approved."), ("press-2", "Already decided: approved by Ann.")]
    assert texts().count("Hook clean.") == 1


def test_the_board_settles_every_offering_chat_once() -> None:
    settled: list[tuple[str, str, str, Verdict]] = []
    board = ApprovalBoard(lambda *args: settled.append(args), limit=2)
    board.offered("a1", "tg", "1")
    board.offered("a1", "sl", "C1")
    board.begin("a1", "Ann")
    assert board.decide("a1", True) is True  # seen in the stream while Ann's press applies
    assert board.decide("a1", False, "Bob") is False  # the first decision stands
    board.end("a1")
    verdict = Verdict(True, "Ann")
    assert settled == [("sl", "C1", "a1", verdict), ("tg", "1", "a1", verdict)]
    board.offered("a1", "tg", "2")  # offered again after its decision: settled at once
    assert settled[-1] == ("tg", "2", "a1", verdict)
    assert board.verdict("a1") == verdict and verdict.line() == "✅ Approved by Ann"
    assert Verdict(False).already() == "Already decided: denied."
    board.offered("a2", "tg", "1")
    board.offered("a3", "tg", "1")
    assert board.verdict("a1") is None  # bounded: the oldest is forgotten
