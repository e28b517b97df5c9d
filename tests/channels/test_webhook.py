"""The generic signed webhook channel: inbound signatures (401, nothing stored), replay
window, and signed outbound progress/final POSTs to a loopback receiver; plus the REST view."""

from __future__ import annotations

import time
from typing import Any

import httpx
import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from drupe.api.app_factory import create_app
from drupe.app import Runtime
from drupe.channels.config import parse_channel_configs
from drupe.channels.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign, verify
from drupe.testing.fake_platform import PlatformRecorder
from drupe.testing.loopback import serve_app
from tests.channels.conftest import ENV, OpenChannels
from tests.channels.support import drained

SECRET = ENV["HOOK_SECRET"]


def receiver(recorder: PlatformRecorder) -> Starlette:
    async def inbound(request: Request) -> Response:
        body = await request.body()
        ok = verify(
            SECRET,
            request.headers.get(TIMESTAMP_HEADER),
            request.headers.get(SIGNATURE_HEADER),
            body,
            now=time.time(),
        )
        if not ok:
            recorder.record("bad-signature", {})
            return JSONResponse({"detail": "bad signature"}, 401)
        payload = orjson.loads(body)
        recorder.record(payload["type"], payload)
        return JSONResponse({"ok": True})

    return Starlette(routes=[Route("/hook", inbound, methods=["POST"])])


def signed(
    body: dict[str, Any], *, secret: str = SECRET, at: float | None = None
) -> dict[str, Any]:
    raw = orjson.dumps(body)
    stamp = str(int(at if at is not None else time.time()))
    return {
        "content": raw,
        "headers": {
            "content-type": "application/json",
            TIMESTAMP_HEADER: stamp,
            SIGNATURE_HEADER: sign(secret, stamp, raw),
        },
    }


def webhook_config(url: str, target: str = "model:scripted:echo") -> Any:
    table = {
        "type": "webhook",
        "secret_env": "HOOK_SECRET",
        "url": url,
        "allowed_users": ["u1"],
        "target": target,
        "debounce": 0,
    }
    return parse_channel_configs({"channels": {"hook": table}}, ENV)[0]


async def test_signatures_are_verified_and_answers_are_posted_signed(
    runtime: Runtime, open_channels: OpenChannels
) -> None:
    recorder = PlatformRecorder()
    async with (
        serve_app(receiver(recorder)) as root,
        open_channels(webhook_config(f"{root}/hook")) as service,
    ):
        runtime.channels = service
        transport = httpx.ASGITransport(create_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://drupe.test") as c:
            message = {"type": "message", "chatId": "room1", "userId": "u1", "text": "hi!"}
            url = "/channels/hook/webhook"
            bad = signed(message, secret="not-the-secret")
            assert (await c.post(url, **bad)).status_code == 401
            stale = signed(message, at=time.time() - 301)
            assert (await c.post(url, **stale)).status_code == 401
            unsigned = await c.post(url, json=message)
            assert unsigned.status_code == 401
            # nothing was dispatched or stored for the three refused requests
            assert await runtime.db.channels.binding("hook", "room1") is None
            assert (
                await runtime.db.conversations.list() in ([],)
                or not (await runtime.db.conversations.list()).items
            )
            malformed = signed({"type": "message", "chatId": "room1"})
            assert (await c.post(url, **malformed)).status_code == 400
            accepted = await c.post(url, **signed(message))
            assert accepted.status_code == 202
            await recorder.wait_until(
                lambda: any("hi!" in str(call.params.get("text")) for call in recorder.calls)
            )
            await drained(service, "room1", channel="hook")
            listing = (await c.get("/api/channels")).json()
        runtime.channels = None
    assert recorder.of("bad-signature") == []  # every outbound POST was signed right
    sends = recorder.of("send")
    assert sends and sends[0].params["chatId"] == "room1"
    final = (recorder.of("edit") or sends)[-1].params["text"]
    assert "hi!" in final
    (channel,) = listing
    assert channel["id"] == "hook" and channel["state"] == "connected"
    assert channel["secretEnv"] == "HOOK_SECRET"
    assert SECRET not in orjson.dumps(listing).decode()
    assert channel["chats"][0]["chatId"] == "room1"


async def _remove(arguments: Any, context: Any) -> str:
    return "removed"


async def test_a_headless_channel_denies_tool_approvals(
    runtime: Runtime, open_channels: OpenChannels
) -> None:
    from drupe.agent.models.script import Text, ToolCall
    from drupe.agent.models.scripted import register_script
    from drupe.tools.base import ToolEntry

    register_script(
        "hook-rm",
        [[ToolCall("rm", {"path": "/etc"}, tool_call_id="call-1")], [Text("Nothing removed.")]],
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
    recorder = PlatformRecorder()
    async with serve_app(receiver(recorder)) as root:
        config = webhook_config(f"{root}/hook", target="model:scripted:hook-rm")
        async with open_channels(config) as service:
            assert service.channels["hook"].config.headless  # the webhook default
            runtime.channels = service
            transport = httpx.ASGITransport(create_app(runtime))
            async with httpx.AsyncClient(transport=transport, base_url="http://drupe.test") as c:
                message = {"type": "message", "chatId": "r2", "userId": "u1", "text": "rm it"}
                r = await c.post("/channels/hook/webhook", **signed(message))
                assert r.status_code == 202
            runtime.channels = None
            texts = lambda: [str(call.params.get("text")) for call in recorder.calls]  # noqa: E731
            await recorder.wait_until(lambda: any("Nothing removed." in t for t in texts()))
            await drained(service, "r2", channel="hook")
            binding = await runtime.db.channels.binding("hook", "r2")
            assert binding is not None
            await runtime.manager.wait_settled(binding.conversation_id)
            rows = await runtime.db.messages.list_for_conversation(binding.conversation_id)
    assert any("cannot approve" in t for t in texts())
    tool = next(p for p in rows[1].parts if p["type"] == "tool-rm")
    assert tool["state"] == "output-denied"
    assert all(not b for call in recorder.of("send") for b in call.params.get("buttons", []))
