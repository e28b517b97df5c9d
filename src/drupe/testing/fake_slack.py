"""A loopback fake of the Slack Web API for ``slack-sdk``'s ``AsyncWebClient(base_url=...)``.

Serves ``POST /api/<method>``: ``auth.test``, ``chat.postMessage`` (returns a ``ts``; keeps
the message's text and blocks per channel), ``chat.update`` (blocks left out are kept, as
Slack's reference says: ``blocks(ts)`` is what a message shows now), ``chat.postEphemeral``
(``ephemerals()``: what each user was shown), ``apps.connections.open`` (the URL of its own
Socket Mode WebSocket at ``/link``: it greets with ``hello``, sends the envelopes a test queues
with ``push_envelope`` and records each ``envelope_id`` the client acknowledges). Records
every call (``recorder``); faults come from the ``PlatformRecorder`` (a 429 answers with
``Retry-After``). ``signed_request`` builds what Slack POSTs to an app: the body and the
``X-Slack-Signature`` headers, signed with ``slack-sdk``'s own ``SignatureVerifier``.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson
from slack_sdk.signature import SignatureVerifier
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from drupe.testing.fake_platform import PlatformRecorder, request_params
from drupe.testing.loopback import serve_app

__all__ = ["FakeSlack", "fake_slack", "signed_request"]


@dataclass
class FakeSlack:
    recorder: PlatformRecorder = field(default_factory=PlatformRecorder)
    base_url: str = ""
    texts: dict[str, str] = field(default_factory=dict)
    channels: dict[str, str] = field(default_factory=dict)
    message_blocks: dict[str, Any] = field(default_factory=dict)
    _ts: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    acked: list[str] = field(default_factory=list)
    root: str = ""
    _outbox: list[dict[str, Any]] = field(default_factory=list)
    _queued: anyio.Event = field(default_factory=anyio.Event)

    def push_envelope(self, payload: dict[str, Any], kind: str = "events_api") -> str:
        """Queue a Socket Mode envelope (an Events API body, ...); returns its envelope id."""
        envelope_id = uuid.uuid4().hex
        self._outbox.append(
            {
                "envelope_id": envelope_id,
                "type": kind,
                "accepts_response_payload": False,
                "payload": payload,
            }
        )
        self._queued.set()
        self._queued = anyio.Event()
        return envelope_id

    async def socket(self, websocket: WebSocket) -> None:
        await websocket.accept()
        self.recorder.record("socket.connect", {})
        await websocket.send_json({"type": "hello", "num_connections": 1, "debug_info": {}})

        async def receive_acks() -> None:
            while True:
                data = orjson.loads(await websocket.receive_text())
                if "envelope_id" in data:
                    self.acked.append(str(data["envelope_id"]))
                    self.recorder.notify()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(receive_acks)
                while True:
                    while self._outbox:
                        await websocket.send_json(self._outbox.pop(0))
                    await self._queued.wait()
        except WebSocketDisconnect:
            return

    def blocks(self, ts: str) -> Any:
        """The blocks a message shows now (None: none)."""
        return self.message_blocks.get(ts)

    def ephemerals(self) -> list[tuple[str, str]]:
        """(user, text) of every ephemeral message, in order."""
        return [
            (str(c.params.get("user")), str(c.params.get("text")))
            for c in self.recorder.of("chat.postEphemeral")
        ]

    def messages(self, channel: str) -> list[str]:
        return [text for ts, text in self.texts.items() if self.channels[ts] == channel]

    async def api(self, request: Request) -> Response:
        method = request.path_params["method"]
        params = await request_params(request)
        self.recorder.record(method, params)
        fault = self.recorder.take_fault(method)
        if fault is not None:
            headers = {"Retry-After": str(int(fault.retry_after or 1))}
            return JSONResponse({"ok": False, "error": "ratelimited"}, fault.status, headers)
        if "channel" in params:
            await self.recorder.maybe_hang(params["channel"])
        if method == "auth.test":
            return JSONResponse(
                {"ok": True, "user_id": "UBOT", "bot_id": "BBOT", "team_id": "T1", "user": "drupe"}
            )
        if method == "apps.connections.open":
            return JSONResponse({"ok": True, "url": f"{self.root.replace('http', 'ws', 1)}/link"})
        if method == "chat.postMessage":
            ts = f"{int(time.time())}.{next(self._ts):06d}"
            self.texts[ts] = str(params.get("text"))
            self.channels[ts] = str(params.get("channel"))
            self.message_blocks[ts] = params.get("blocks")
            self.recorder.notify()
            return JSONResponse({"ok": True, "channel": params.get("channel"), "ts": ts})
        if method == "chat.update":
            ts = str(params.get("ts"))
            if ts not in self.texts:
                return JSONResponse({"ok": False, "error": "message_not_found"})
            self.texts[ts] = str(params.get("text"))
            if "blocks" in params:
                self.message_blocks[ts] = params["blocks"]
            self.recorder.notify()
            return JSONResponse({"ok": True, "channel": params.get("channel"), "ts": ts})
        if method == "chat.postEphemeral":
            if not params.get("user") or not params.get("channel"):
                return JSONResponse({"ok": False, "error": "invalid_arguments"})
            return JSONResponse({"ok": True, "message_ts": f"{time.time():.6f}"})
        return JSONResponse({"ok": False, "error": "unknown_method"})

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/api/{method}", self.api, methods=["POST"]),
                WebSocketRoute("/link", self.socket),
            ]
        )


def signed_request(
    secret: str, payload: dict[str, Any] | None = None, *, form: str | None = None
) -> dict[str, Any]:
    """httpx keyword arguments for a Slack-signed POST (JSON event or form interactivity)."""
    body = form.encode() if form is not None else orjson.dumps(payload)
    stamp = str(int(time.time()))
    signature = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body)
    content_type = "application/x-www-form-urlencoded" if form is not None else "application/json"
    return {
        "content": body,
        "headers": {
            "content-type": content_type,
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": signature,
        },
    }


@asynccontextmanager
async def fake_slack() -> AsyncIterator[FakeSlack]:
    fake = FakeSlack()
    async with serve_app(fake.app()) as root:
        fake.base_url = f"{root}/api/"
        fake.root = root
        try:
            yield fake
        finally:
            fake.recorder.release()
