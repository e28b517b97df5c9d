"""The bundled local model answers a real turn: streamed to a subscriber and persisted.

Runs only under ``scripts/test --local`` (it needs the ``local`` extra: llama-cpp-python and
the Gemma 3 270M package). The model is a base model: the test checks plumbing, not meaning.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from drupe.admission.base import Submit
from drupe.app import open_runtime
from drupe.settings import Settings
from drupe.testing.recording import RecordingListener

pytestmark = [pytest.mark.local, pytest.mark.timeout(600)]


async def test_local_gemma_turn_is_streamed_and_persisted(tmp_path: Path) -> None:
    async with open_runtime(Settings(data_dir=tmp_path)) as rt:
        cid = (await rt.db.conversations.create(title="local")).id
        tab = RecordingListener("wc")
        with anyio.fail_after(540):
            result = await rt.dispatcher.dispatch(
                Submit(
                    conversation_id=cid,
                    parts=[{"type": "text", "text": "Say hello."}],
                    model_ids=["local:gemma3-270m"],
                ),
                [tab],
            )
            done = await tab.wait_done()
        assert done.status == "success"
        deltas = [c for c in tab.chunks() if c["type"] == "text-delta"]
        assert len(deltas) > 1  # streamed, not one blob
        row = await rt.db.messages.get(result.placeholder_ids[0])
        assert row is not None and row.status == "success"
        text = "".join(p.get("text", "") for p in row.parts if p["type"] == "text")
        assert text.strip()
        assert row.parts == tab.message()["parts"]
