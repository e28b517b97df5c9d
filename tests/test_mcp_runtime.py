"""MCP servers configured in config.toml never delay a turn (issue 3 acceptance)."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from drupe.admission.base import Submit
from drupe.app import open_runtime
from drupe.settings import Settings
from drupe.testing.recording import RecordingListener


async def test_dead_and_hanging_mcp_servers_delay_no_turn(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        f"""
[mcp.servers.dead]
command = "{sys.executable}"
args = ["-c", "raise SystemExit(3)"]

[mcp.servers.hangs]
command = "{sys.executable}"
args = ["-c", "import time; time.sleep(600)"]
"""
    )
    async with open_runtime(Settings(data_dir=tmp_path, config_path=config)) as rt:
        assert rt.mcp is not None
        assert {s.id for s in rt.mcp.servers()} == {"dead", "hangs"}
        cid = (await rt.db.conversations.create()).id
        rec = RecordingListener("wc")
        with anyio.fail_after(10):  # generous: the turn itself takes milliseconds
            await rt.dispatcher.dispatch(
                Submit(
                    conversation_id=cid,
                    parts=[{"type": "text", "text": "hi"}],
                    model_ids=["scripted:echo"],
                ),
                [rec],
            )
            done = await rec.wait_done()
        assert done.status == "success"
        assert "hi" in str(rec.message()["parts"])
