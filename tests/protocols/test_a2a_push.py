"""A2A push notifications: signed like the webhook channel, retried until delivered."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
from a2a.types.a2a_pb2 import (
    SendMessageRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from drupe.app import Runtime
from drupe.channels.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify
from drupe.testing.loopback import serve_app
from tests.gateway.conftest import LiveServer
from tests.protocols.a2a_support import a2a_client, make_agent, send_request


class Receiver:
    """A webhook that answers 503 to the first ``failures`` attempts."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.attempts: list[tuple[dict[str, str], bytes]] = []
        self.delivered = anyio.Event()

    async def hook(self, request: Request) -> Response:
        self.attempts.append((dict(request.headers), await request.body()))
        if len(self.attempts) <= self.failures:
            return Response(status_code=503)
        self.delivered.set()
        return Response(status_code=204)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/hook", self.hook, methods=["POST"])])


async def test_a_task_end_is_pushed_signed_and_retried(
    server: LiveServer, key: str, runtime: Runtime, tmp_path: Path
) -> None:
    agent_id = await make_agent(runtime, tmp_path, "scripted:echo")
    receiver = Receiver(failures=2)
    async with serve_app(receiver.app()) as hook_base:
        request: SendMessageRequest = send_request("push me")
        request.configuration.task_push_notification_config.CopyFrom(
            TaskPushNotificationConfig(url=f"{hook_base}/hook", token="s3cret-token")
        )
        async with a2a_client(server.url, agent_id, key, streaming=False) as client:
            events = [e async for e in client.send_message(request)]
        task_id = events[0].task.id
        with anyio.fail_after(30):
            await receiver.delivered.wait()
    assert len(receiver.attempts) == 3  # two refusals, then the delivery
    headers, body = receiver.attempts[-1]
    assert verify(
        "s3cret-token",
        headers[TIMESTAMP_HEADER.lower()],
        headers[SIGNATURE_HEADER.lower()],
        body,
        now=time.time(),
    )
    assert not verify(
        "wrong",
        headers[TIMESTAMP_HEADER.lower()],
        headers[SIGNATURE_HEADER.lower()],
        body,
        now=time.time(),
    )
    assert headers["x-a2a-notification-token"] == "s3cret-token"
    task: dict[str, Any] = json.loads(body)["task"]
    assert task["id"] == task_id
    assert task["status"]["state"] == TaskState.Name(TaskState.TASK_STATE_COMPLETED)
    assert task["artifacts"][0]["parts"][0]["text"] == "You said: push me"


async def test_a_push_config_without_a_token_is_refused_before_anything_is_stored(
    http: httpx.AsyncClient, runtime: Runtime, tmp_path: Path
) -> None:
    agent_id = await make_agent(runtime, tmp_path, "scripted:echo")
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]},
            "configuration": {"taskPushNotificationConfig": {"url": "https://example.org/h"}},
        },
    }
    payload = (
        await http.post(f"/a2a/{agent_id}", json=body, headers={"A2A-Version": "1.0"})
    ).json()
    assert payload["error"]["code"] == -32602 and "token" in payload["error"]["message"]
    assert await runtime.db.agents.list_sessions(agent_id) == []
