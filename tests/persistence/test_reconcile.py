"""Boot reconciliation: every pending assistant row becomes error with one data-error part."""

from __future__ import annotations

from drupe.persistence import RESTART_ERROR_PART, Database, NewMessage, NewPlaceholder


async def test_reconcile_settles_only_pending_rows(database: Database) -> None:
    conversation = await database.conversations.create()
    await database.messages.create_turn(
        conversation.id,
        user_message=NewMessage(id="u1", parts=[{"type": "text", "text": "q"}]),
        parent_id=None,
        placeholders=[NewPlaceholder(message_id=f"a{n}", model_id=f"m{n}") for n in range(1, 6)],
    )
    text = {"type": "text", "text": "partial"}
    old_error = {"type": "data-error", "data": {"name": "StreamError", "message": "x"}}
    await database.messages.finalize_assistant("a1", parts=[text], status="success")
    await database.messages.finalize_assistant("a2", parts=[text, old_error], status="error")
    await database.messages.finalize_assistant("a3", parts=[], status="paused")
    # a4 stays an empty placeholder; a5 was reopened with parts, one an old data-error.
    await database.messages.set_pending("a5", parts=[text, old_error, {"type": "step-start"}])
    before = {r.id: r for r in await database.messages.list_for_conversation(conversation.id)}

    assert await database.messages.reconcile_pending() == 2

    after = {r.id: r for r in await database.messages.list_for_conversation(conversation.id)}
    for untouched in ("u1", "a1", "a2", "a3"):
        assert after[untouched] == before[untouched]
    assert (after["a4"].status, after["a4"].parts) == ("error", [RESTART_ERROR_PART])
    assert after["a5"].status == "error"
    assert after["a5"].parts == [text, {"type": "step-start"}, RESTART_ERROR_PART]
    assert after["a4"].updated_at > before["a4"].updated_at
    assert RESTART_ERROR_PART["data"]["name"] == "ServerRestart"

    assert await database.messages.reconcile_pending() == 0  # idempotent
    again = await database.messages.list_for_conversation(conversation.id)
    assert {r.id: r for r in again} == after


async def test_reconcile_spans_every_conversation(database: Database) -> None:
    for n in range(3):
        conversation = await database.conversations.create()
        await database.messages.create_placeholder(
            conversation.id, message_id=f"p{n}", parent_id=None, model_id="m"
        )
    assert await database.messages.reconcile_pending() == 3
    for n in range(3):
        row = await database.messages.get(f"p{n}")
        assert row is not None and row.status == "error"
        assert [p["type"] for p in row.parts] == ["data-error"]
