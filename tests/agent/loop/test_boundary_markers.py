"""Invisible tool-boundary markers never reach subscribers or the stored message (§3.1)."""

from __future__ import annotations

from pathlib import Path

from drupe.admission.base import Submit
from drupe.agent.chunker import strip_markers
from drupe.agent.models.script import Text
from drupe.agent.models.scripted import register_script
from drupe.app import open_runtime
from drupe.settings import Settings
from drupe.testing.recording import RecordingListener


def test_strip_markers_removes_only_the_marker_characters() -> None:
    assert strip_markers("a\u2050b\u2057c\u2063d\u2058e") == "abcd\u2058e"
    assert strip_markers("plain ascii") == "plain ascii"


async def test_markers_are_stripped_from_streamed_and_stored_text(tmp_path: Path) -> None:
    register_script("markers", [[Text("Let me check\u2063 the\u2050 files.", chunk_chars=4)]])
    async with open_runtime(Settings(data_dir=tmp_path)) as rt:
        cid = (await rt.db.conversations.create()).id
        tab = RecordingListener("wc")
        result = await rt.dispatcher.dispatch(
            Submit(
                conversation_id=cid,
                parts=[{"type": "text", "text": "go"}],
                model_ids=["scripted:markers"],
            ),
            [tab],
        )
        await tab.wait_done()
        row = await rt.db.messages.get(result.placeholder_ids[0])
        assert row is not None
        text = "".join(p.get("text", "") for p in row.parts if p["type"] == "text")
        assert text == "Let me check the files."
        assert all("\u2063" not in c.get("delta", "") for c in tab.chunks())
