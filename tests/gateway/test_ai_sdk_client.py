"""An unmodified AI SDK client (``DefaultChatTransport`` under Node) against a running Drupe."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

pytestmark = pytest.mark.node

NODE_DIR = Path(__file__).parents[1] / "node"


async def test_default_chat_transport_submits_streams_resumes_and_stops(server: Any) -> None:
    node = shutil.which("node")
    npm = shutil.which("npm")
    assert node is not None and npm is not None, "this test needs node and npm on PATH"
    if not (NODE_DIR / "node_modules" / "ai" / "package.json").exists():
        await anyio.run_process([npm, "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR)
    with anyio.fail_after(50):
        result = await anyio.run_process(
            [node, str(NODE_DIR / "chat_transport.mjs"), server.url],
            check=False,
            stderr=subprocess.PIPE,
        )
    assert result.returncode == 0, result.stderr.decode()
    out = json.loads(result.stdout.decode().strip().splitlines()[-1])

    submit = out["submit"]
    assert submit["text"] == "You said: hello from node"
    assert submit["id"] == submit["storedId"] and submit["storedStatus"] == "success"

    resume = out["resume"]
    assert resume["firstChunks"][0] == "start"
    assert resume["resumed"] is True
    assert resume["id"] == resume["storedId"]
    assert resume["words"] == 80 and resume["sameAsStored"] is True

    stop = out["stop"]
    assert stop["stopped"] == {"stopped": True}
    assert stop["lastChunk"] == "abort"
    assert stop["storedStatus"] == "paused"

    ended = out["ended"]
    assert ended["text"] == "You said: hello from node"
    assert ended["id"] == ended["storedId"]
    assert out["idle"] == {"resumed": None}
