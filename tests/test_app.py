"""The composed runtime end to end: scripted model -> agent loop -> manager -> SQLite."""

from __future__ import annotations

from pathlib import Path

from drupe.admission.base import Submit
from drupe.app import open_runtime
from drupe.persistence.db import open_database
from drupe.persistence.records import NewMessage, NewPlaceholder
from drupe.settings import AuthSettings, Settings
from drupe.testing.recording import RecordingListener


async def test_scripted_turn_is_streamed_and_persisted_as_the_subscriber_saw_it(
    tmp_path: Path,
) -> None:
    settings = Settings(data_dir=tmp_path, auth=AuthSettings(enabled=False))  # --no-auth
    async with open_runtime(settings) as rt:
        conversation = await rt.db.conversations.create(title="demo")
        rec = RecordingListener("wc:1")
        result = await rt.dispatcher.dispatch(
            Submit(
                conversation_id=conversation.id,
                parts=[{"type": "text", "text": "ping"}],
                model_ids=["scripted:echo"],
            ),
            [rec],
        )
        terminal = await rec.wait_done()
        assert terminal.status == "success"
        row = await rt.db.messages.get(result.placeholder_ids[0])
        assert row is not None and row.status == "success"
        seen = rec.message()
        assert seen["id"] == row.id
        assert row.parts == seen["parts"]
        text = "".join(p.get("text", "") for p in row.parts if p["type"] == "text")
        assert "ping" in text


async def test_scenario_38_boot_reconciles_pending_rows_before_any_admission(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'drupe.db'}"
    async with open_database(url) as db:
        conversation = await db.conversations.create()
        await db.messages.create_turn(
            conversation.id,
            user_message=NewMessage(id="u1", parts=[{"type": "text", "text": "hi"}]),
            parent_id=None,
            placeholders=[NewPlaceholder(message_id="a1", model_id="scripted:echo")],
        )
    async with open_runtime(Settings(data_dir=tmp_path, database_url=url)) as rt:
        assert rt.reconciled_rows == 1
        row = await rt.db.messages.get("a1")
        assert row is not None and row.status == "error"
        assert [p["type"] for p in row.parts] == ["data-error"]
