"""Bad A2A input: each gets its JSON-RPC error code, and nothing is stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from drupe.app import Runtime
from drupe.persistence.records import KeyScopes
from tests.gateway.conftest import LiveServer
from tests.protocols.a2a_support import make_agent

V1 = {"A2A-Version": "1.0"}


def _send(text: str, **message: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": "m1",
                "role": "ROLE_USER",
                "parts": [{"text": text}],
                **message,
            }
        },
    }


@pytest.mark.parametrize(
    ("body", "headers", "code"),
    [
        (b"{not json", V1, -32700),
        (b'{"jsonrpc": "2.0", "id": 1}', V1, -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "tasks/teleport"}', V1, -32601),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "msg_nope"}}',
            V1,
            -32001,
        ),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": "x"}}', V1, -32001),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": "x"}}',
            V1,
            -32001,
        ),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "CreateTaskPushNotificationConfig", '
            b'"params": {"taskId": "x", "url": "https://example.org/hook"}}',
            V1,
            -32001,  # an unknown task
        ),
        (None, {"A2A-Version": "9.0"}, -32009),
        (None, {}, -32009),  # no header means 0.3, which this endpoint does not serve
    ],
)
async def test_errors_have_their_json_rpc_codes_and_store_nothing(
    http: httpx.AsyncClient,
    runtime: Runtime,
    tmp_path: Path,
    body: bytes | None,
    headers: dict[str, str],
    code: int,
) -> None:
    agent_id = await make_agent(runtime, tmp_path, "scripted:echo")
    if body is None:
        response = await http.post(f"/a2a/{agent_id}", json=_send("hi"), headers=headers)
    else:
        response = await http.post(
            f"/a2a/{agent_id}",
            content=body,
            headers={**headers, "content-type": "application/json"},
        )
    assert response.status_code == 200
    payload = response.json()
    assert payload["jsonrpc"] == "2.0" and payload["error"]["code"] == code, payload
    assert await runtime.db.agents.list_sessions(agent_id) == []


async def test_refused_messages_store_nothing(
    http: httpx.AsyncClient, runtime: Runtime, tmp_path: Path
) -> None:
    agent_id = await make_agent(runtime, tmp_path, "scripted:echo")
    too_long = "x" * (runtime.settings.limits.max_message_chars + 1)
    for body in (
        _send(too_long),
        _send("hi", taskId="msg_unknown"),
        {
            **_send("hi"),
            "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}},
        },
    ):
        payload = (await http.post(f"/a2a/{agent_id}", json=body, headers=V1)).json()
        assert payload["error"]["code"] in (-32602, -32001), payload
    assert await runtime.db.agents.list_sessions(agent_id) == []


async def test_unknown_agent_and_missing_key(
    http: httpx.AsyncClient, anonymous: httpx.AsyncClient, runtime: Runtime, tmp_path: Path
) -> None:
    response = await http.post("/a2a/nope", json=_send("hi"), headers=V1)
    assert response.status_code == 404 and response.json()["error"]["code"] == -32600
    agent_id = await make_agent(runtime, tmp_path, "scripted:echo")
    response = await anonymous.post(f"/a2a/{agent_id}", json=_send("hi"), headers=V1)
    assert response.status_code == 401
    assert "missing API key" in response.json()["error"]["message"]
    assert await runtime.db.agents.list_sessions(agent_id) == []


async def test_a_body_past_the_limit_is_refused(
    http: httpx.AsyncClient, runtime: Runtime, tmp_path: Path
) -> None:
    agent_id = await make_agent(runtime, tmp_path, "scripted:echo")
    huge = "x" * (runtime.settings.limits.max_body_bytes + 10)
    response = await http.post(f"/a2a/{agent_id}", json=_send(huge), headers=V1)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == -32600  # the guard answers in JSON-RPC's shape
    assert await runtime.db.agents.list_sessions(agent_id) == []


async def test_a_refused_message_leaves_no_session_behind(
    http: httpx.AsyncClient, runtime: Runtime
) -> None:
    agent = await runtime.db.agents.create_agent(
        name="no-workspace", driver_type="inprocess", model_id="scripted:echo"
    )
    for body in (_send("hi"), _send("hi", contextId="ctx-new")):
        payload = (await http.post(f"/a2a/{agent.id}", json=body, headers=V1)).json()
        assert payload["error"]["code"] == -32602 and "workspace" in payload["error"]["message"]
    assert await runtime.db.agents.list_sessions(agent.id) == []


async def test_a_key_scoped_to_other_agents_is_refused(
    server: LiveServer, runtime: Runtime, tmp_path: Path
) -> None:
    agent_id = await make_agent(runtime, tmp_path, "scripted:echo")
    other, _ = await runtime.db.api_keys.create("other", KeyScopes(agents=["agent_other"]))
    async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
        response = await client.post(
            f"/a2a/{agent_id}",
            json=_send("hi"),
            headers={**V1, "authorization": f"Bearer {other}"},
        )
    assert response.status_code == 403
    assert agent_id in response.json()["error"]["message"]
    assert await runtime.db.agents.list_sessions(agent_id) == []
