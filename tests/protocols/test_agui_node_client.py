"""An unmodified AG-UI client (``@ag-ui/client``'s ``HttpAgent`` under Node) against Drupe."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

from drupe.app import Runtime
from tests.gateway.conftest import LiveServer
from tests.protocols.test_agui_approvals import register_gated_tool

pytestmark = pytest.mark.node

NODE_DIR = Path(__file__).parents[1] / "node"


async def run_node(script: str, *args: str) -> dict[str, object]:
    node, npm = shutil.which("node"), shutil.which("npm")
    assert node is not None and npm is not None, "this test needs node and npm on PATH"
    if not (NODE_DIR / "node_modules" / "@ag-ui" / "client" / "package.json").exists():
        await anyio.run_process([npm, "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR)
    with anyio.fail_after(50):
        result = await anyio.run_process(
            [node, str(NODE_DIR / script), *args], check=False, stderr=subprocess.PIPE
        )
    assert result.returncode == 0, result.stderr.decode()
    out: dict[str, object] = json.loads(result.stdout.decode().strip().splitlines()[-1])
    return out


async def test_http_agent_turns_stop_client_tool_reasoning_and_approval(
    server: LiveServer, key: str, runtime: Runtime
) -> None:
    register_gated_tool(runtime, [])
    out = await run_node("agui_client.mjs", server.url, key)
    first, second, stop = out["first"], out["second"], out["stop"]
    assert isinstance(first, dict) and isinstance(second, dict) and isinstance(stop, dict)
    assert first["text"] == "You said: hello from ag-ui"
    assert second["text"] == "You said: and again"
    # The client's assistant message is the stored row (same id, same text).
    assert out["storedIds"] and first["id"] == out["storedIds"][0]  # type: ignore[index]
    assert out["storedTexts"] == [first["text"], second["text"]]
    assert stop["stopped"] == {"stopped": True}
    assert stop["outcome"] == "cancelled"
    assert stop["storedStatus"] == "paused"
    assert stop["text"] == stop["storedText"] and stop["text"]
    tool = out["tool"]
    assert isinstance(tool, dict)
    assert tool["name"] == "pick_color"
    assert json.loads(str(tool["args"])) == {"options": ["red", "blue"]}
    assert tool["pending"] == [tool["callId"]]
    assert "blue" in str(tool["answer"])
    assert tool["toolMessages"] == 1  # the client's own result, not echoed back as a second one
    reasoning = out["reasoning"]
    assert isinstance(reasoning, dict)
    assert reasoning["text"] == "Having thought about it: why"
    assert str(reasoning["reasoning"]).startswith("The user asked something.")
    approval = out["approval"]
    assert isinstance(approval, dict)
    assert approval["outcome"] == "interrupt"
    (interrupt,) = approval["interrupts"]
    assert interrupt["reason"] == "tool_approval"
    assert approval["after"] == 0  # the resume answered it
    assert "The delete_file tool returned: " in str(approval["text"])
