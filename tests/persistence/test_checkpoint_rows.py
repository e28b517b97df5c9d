"""Checkpoint writes and what the boot reconcile makes of checkpointed rows (SQLite and
PostgreSQL)."""

from __future__ import annotations

import orjson

from drupe.persistence import RESTART_ERROR_PART, Database, NewMessage, NewPlaceholder


async def _turn(database: Database, *rows: str) -> str:
    conversation = await database.conversations.create()
    await database.messages.create_turn(
        conversation.id,
        user_message=NewMessage(id="u1", parts=[{"type": "text", "text": "q"}]),
        parent_id=None,
        placeholders=[NewPlaceholder(message_id=r, model_id=f"m-{r}") for r in rows],
    )
    return conversation.id


def _json(parts: list[dict[str, object]]) -> str:
    return orjson.dumps(parts).decode()


async def test_checkpoint_writes_only_rows_that_are_still_pending(database: Database) -> None:
    await _turn(database, "live", "settled")
    final = [{"type": "text", "text": "the whole answer", "state": "done"}]
    await database.messages.finalize_assistant("settled", parts=final, status="success")
    partial = [{"type": "text", "text": "part of", "state": "streaming"}]

    changed = await database.messages.write_checkpoints(
        [("live", _json(partial)), ("settled", _json([{"type": "text", "text": "stale"}]))]
    )

    live = await database.messages.get("live")
    settled = await database.messages.get("settled")
    assert live is not None and (live.status, live.parts) == ("pending", partial)
    assert settled is not None and (settled.status, settled.parts) == ("success", final)
    if database.dialect == "sqlite":  # asyncpg reports no executemany count
        assert changed == 1


async def test_checkpoint_of_text_holding_nul_is_stored(database: Database) -> None:
    await _turn(database, "live")
    await database.messages.write_checkpoints(
        [("live", _json([{"type": "text", "text": "a\u0000b"}]))]
    )
    live = await database.messages.get("live")
    assert live is not None
    expected = "a\ufffdb" if database.dialect == "postgresql" else "a\u0000b"
    assert live.parts == [{"type": "text", "text": expected}]


async def test_reconcile_keeps_checkpointed_parts_closed_as_interrupted(
    database: Database,
) -> None:
    conversation = await _turn(database, "crashed", "empty")
    checkpointed = [
        {"type": "step-start"},
        {"type": "reasoning", "text": "thinking", "state": "streaming"},
        {"type": "tool-search", "toolCallId": "c1", "state": "input-available", "input": {}},
        {"type": "text", "text": "half an answ", "state": "streaming"},
        {"type": "text", "text": "", "state": "streaming"},
    ]
    await database.messages.write_checkpoints([("crashed", _json(checkpointed))])

    assert await database.messages.reconcile_pending() == 2

    rows = {r.id: r for r in await database.messages.list_for_conversation(conversation)}
    assert rows["crashed"].status == "error"
    assert rows["crashed"].parts == [
        {"type": "step-start"},
        {"type": "reasoning", "text": "thinking", "state": "done"},
        {
            "type": "tool-search",
            "toolCallId": "c1",
            "state": "output-error",
            "input": {},
            "errorText": "Stream errored before tool completed",
        },
        {"type": "text", "text": "half an answ", "state": "done"},
        RESTART_ERROR_PART,
    ]
    assert (rows["empty"].status, rows["empty"].parts) == ("error", [RESTART_ERROR_PART])
