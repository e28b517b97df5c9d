"""Slack through slack-bolt and slack-sdk: signed requests to the FastAPI app, replies in
threads through the loopback fake Web API, redelivery dedupe, approvals by block action."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

import httpx
import orjson
import pytest

from drupe.agent.models.script import Text, ToolCall
from drupe.agent.models.scripted import register_script
from drupe.api.app_factory import create_app
from drupe.app import Runtime
from drupe.channels.config import ChannelConfig, parse_channel_configs
from drupe.channels.slack import SlackAdapter
from drupe.testing.fake_slack import FakeSlack, signed_request
from drupe.tools.base import ToolContext, ToolEntry
from tests.channels.conftest import ENV, OpenChannels
from tests.channels.support import drained, rows_of, text_of

SECRET = ENV["SLACK_SECRET"]
URL = "/channels/sl/slack/events"


def slack_config(base_url: str, **overrides: Any) -> ChannelConfig:
    table: dict[str, Any] = {
        "type": "slack",
        "token_env": "SLACK_TOKEN",
        "secret_env": "SLACK_SECRET",
        "allowed_chats": ["C1"],
        "target": "model:scripted:echo",
        "debounce": 0,
        "base_url": base_url,
    }
    table.update(overrides)
    return parse_channel_configs({"channels": {"sl": table}}, ENV)[0]


def event(text: str, *, event_id: str, ts: str = "1700000000.000100") -> dict[str, Any]:
    return {
        "token": "legacy",
        "team_id": "T1",
        "api_app_id": "A1",
        "type": "event_callback",
        "event_id": event_id,
        "event_time": int(time.time()),
        "event": {
            "type": "message",
            "channel": "C1",
            "channel_type": "channel",
            "user": "U1",
            "text": f"<@UBOT> {text}",
            "ts": ts,
        },
    }


async def test_a_redelivered_event_never_starts_a_second_turn(
    runtime: Runtime, slack: FakeSlack, open_channels: OpenChannels
) -> None:
    async with open_channels(slack_config(slack.base_url)) as service:
        runtime.channels = service
        transport = httpx.ASGITransport(create_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://drupe.test") as c:
            body = event("hello slack", event_id="Ev1")
            first = await c.post(URL, **signed_request(SECRET, body))
            assert first.status_code == 200
            retry = signed_request(SECRET, body)
            retry["headers"].update({"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "timeout"})
            assert (await c.post(URL, **retry)).status_code == 200
            await slack.recorder.wait_until(
                lambda: any("hello slack" in t for t in slack.messages("C1"))
            )
            await drained(service, "C1:1700000000.000100", channel="sl")
            rows = await rows_of(runtime, "C1:1700000000.000100", channel="sl")
        runtime.channels = None
    assert [r.role for r in rows] == ["user", "assistant"]  # one turn for two deliveries
    posts = slack.recorder.of("chat.postMessage")
    assert len(posts) == 1
    assert posts[0].params["thread_ts"] == "1700000000.000100"  # the reply is in the thread
    assert "hello slack" in text_of(rows[1])


async def test_a_bad_signature_is_refused_and_nothing_is_stored(
    runtime: Runtime, slack: FakeSlack, open_channels: OpenChannels
) -> None:
    async with open_channels(slack_config(slack.base_url)) as service:
        runtime.channels = service
        transport = httpx.ASGITransport(create_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://drupe.test") as c:
            forged = signed_request("wrong-secret", event("sneaky", event_id="Ev2"))
            assert (await c.post(URL, **forged)).status_code == 401
            unsigned = await c.post(URL, content=orjson.dumps(event("x", event_id="Ev3")))
            assert unsigned.status_code == 401
            # a genuine delivery of the forged event id afterwards is NOT a duplicate
            ok = await c.post(URL, **signed_request(SECRET, event("real one", event_id="Ev2")))
            assert ok.status_code == 200
            await slack.recorder.wait_until(
                lambda: any("real one" in t for t in slack.messages("C1"))
            )
        runtime.channels = None
    assert all("sneaky" not in t for t in slack.messages("C1"))
    conversations = await runtime.db.conversations.list()
    assert len(conversations) == 1
    rows = await runtime.db.messages.list_for_conversation(conversations[0].id)
    assert all("sneaky" not in text_of(r) for r in rows)


async def _remove(arguments: Mapping[str, Any], context: ToolContext) -> str:
    return f"removed {arguments.get('path')}"


async def test_an_approval_by_block_action_button(
    runtime: Runtime, slack: FakeSlack, open_channels: OpenChannels
) -> None:
    register_script(
        "sl-approve-rm",
        [[ToolCall("rm", {"path": "/tmp/y"}, tool_call_id="call-1")], [Text("Slack clean.")]],
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
    config = slack_config(slack.base_url, target="model:scripted:sl-approve-rm")
    async with open_channels(config) as service:
        runtime.channels = service
        transport = httpx.ASGITransport(create_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://drupe.test") as c:
            ts = "1700000001.000200"
            await c.post(URL, **signed_request(SECRET, event("tidy up", event_id="Ev9", ts=ts)))
            await slack.recorder.wait_until(
                lambda: any(
                    "blocks" in call.params for call in slack.recorder.of("chat.postMessage")
                )
            )
            prompt = next(
                c.params for c in slack.recorder.of("chat.postMessage") if "blocks" in c.params
            )
            elements = prompt["blocks"][1]["elements"]
            assert [e["action_id"] for e in elements] == ["approve", "deny"]
            payload = {
                "type": "block_actions",
                "team": {"id": "T1"},
                "user": {"id": "U1"},
                "api_app_id": "A1",
                "channel": {"id": "C1"},
                "message": {"ts": "1700000009.000001", "thread_ts": ts},
                "actions": [
                    {
                        "action_id": "approve",
                        "block_id": "b1",
                        "type": "button",
                        "value": elements[0]["value"],
                        "action_ts": "1700000010.1",
                    }
                ],
                "trigger_id": "t1",
            }
            form = urlencode({"payload": orjson.dumps(payload).decode()})
            assert (await c.post(URL, **signed_request(SECRET, form=form))).status_code == 200
            await slack.recorder.wait_until(lambda: "Slack clean." in slack.messages("C1"))
            await drained(service, f"C1:{ts}", channel="sl")
            rows = await rows_of(runtime, f"C1:{ts}", channel="sl")
        runtime.channels = None
    tool = next(p for p in rows[1].parts if p["type"] == "tool-rm")
    assert tool["state"] == "output-available" and tool["output"] == "removed /tmp/y"


async def test_socket_mode_receives_events_over_the_websocket(
    runtime: Runtime, slack: FakeSlack, open_channels: OpenChannels
) -> None:
    config = parse_channel_configs(
        {
            "channels": {
                "sl": {
                    "type": "slack",
                    "token_env": "SLACK_TOKEN",
                    "secret_env": "SLACK_SECRET",
                    "app_token_env": "SLACK_APP_TOKEN",
                    "mode": "socket",
                    "allowed_chats": ["C1"],
                    "target": "model:scripted:echo",
                    "debounce": 0,
                    "base_url": slack.base_url,
                }
            }
        },
        {**ENV, "SLACK_APP_TOKEN": "xapp-test-1"},
    )[0]
    async with open_channels(config) as service:
        assert service.channels["sl"].state == "connected"
        assert len(slack.recorder.of("apps.connections.open")) == 1
        body = event("over the socket", event_id="EvS1", ts="1700000002.000300")
        envelope = slack.push_envelope(body)
        slack.push_envelope(body)  # Slack redelivers: same event id, new envelope
        await slack.recorder.wait_until(
            lambda: any("over the socket" in t for t in slack.messages("C1"))
        )
        await slack.recorder.wait_until(lambda: len(slack.acked) == 2)
        await drained(service, "C1:1700000002.000300", channel="sl")
        rows = await rows_of(runtime, "C1:1700000002.000300", channel="sl")
    assert envelope in slack.acked
    assert [r.role for r in rows] == ["user", "assistant"]
    assert len(slack.recorder.of("chat.postMessage")) == 1


def test_the_adapter_starts_without_bolts_unused_token_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 23.8: Bolt warned "`token` will be unused" at every start (token and client)."""
    with caplog.at_level(logging.WARNING):
        adapter = SlackAdapter(slack_config("http://127.0.0.1:9/api/"))
    assert adapter.app.client.token == ENV["SLACK_TOKEN"]
    assert not [r for r in caplog.records if "will be unused" in r.getMessage()]


async def test_a_slash_command_runs_the_chat_command(
    runtime: Runtime, slack: FakeSlack, open_channels: OpenChannels
) -> None:
    """Issue 23.6: a signed slash-command request (``/drupe help``) is handled, not a 404."""
    async with open_channels(slack_config(slack.base_url)) as service:
        runtime.channels = service
        transport = httpx.ASGITransport(create_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://drupe.test") as c:
            form = urlencode(
                {
                    "command": "/drupe",
                    "text": "help",
                    "user_id": "U1",
                    "user_name": "alice",
                    "channel_id": "C1",
                    "trigger_id": "13345224609.738474920.8088930838d88f008e0",
                    "team_id": "T1",
                }
            )
            response = await c.post(
                URL.replace("/slack/events", "/slack/commands"), **signed_request(SECRET, form=form)
            )
            assert response.status_code == 200, response.text
            await slack.recorder.wait_until(lambda: any("/stop" in t for t in slack.messages("C1")))
        runtime.channels = None
