"""An unmodified A2A client (``@a2a-js/sdk`` under Node) against a loopback Drupe."""

from __future__ import annotations

from pathlib import Path

import pytest
from a2a.types.a2a_pb2 import TaskState

from drupe.app import Runtime
from tests.gateway.conftest import LiveServer
from tests.protocols.a2a_support import make_agent
from tests.protocols.test_agui_node_client import run_node

pytestmark = pytest.mark.node


async def test_a2a_js_discovers_streams_resubscribes_steers_and_cancels(
    server: LiveServer, key: str, runtime: Runtime, tmp_path: Path
) -> None:
    echo = await make_agent(runtime, tmp_path, "scripted:echo", name="echo")
    slow = await make_agent(runtime, tmp_path, "scripted:lorem?words=120&rate=40", name="slow")
    out = await run_node("a2a_client.mjs", server.url, key, echo, slow)
    card, stream, resub, steer = out["card"], out["stream"], out["resubscribe"], out["steer"]
    assert isinstance(card, dict) and card == {"name": "echo", "streaming": True}
    assert isinstance(stream, dict)
    assert stream["text"] == stream["gotText"] == "You said: hello from js"
    assert stream["state"] == TaskState.TASK_STATE_COMPLETED
    assert isinstance(resub, dict)
    assert resub["state"] == TaskState.TASK_STATE_COMPLETED
    row = await runtime.db.messages.get(str(resub["id"]))
    assert row is not None
    stored = "".join(p["text"] for p in row.parts if p.get("type") == "text")
    assert resub["text"] == resub["storedText"] == stored and len(stored.split()) == 120
    assert str(resub["text"]).startswith(str(resub["firstText"]))
    assert isinstance(steer, dict)
    assert steer["steered"] == {"id": steer["taskId"], "state": TaskState.TASK_STATE_WORKING}
    assert steer["canceledState"] == steer["streamState"] == TaskState.TASK_STATE_CANCELED
    assert steer["text"] == steer["storedText"]
