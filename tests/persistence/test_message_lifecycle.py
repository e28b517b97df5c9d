"""Terminal writes, reads and the message tree."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from drupe.errors import PersistenceError, ValidationError
from drupe.persistence import Database, NewMessage, NewPlaceholder


async def start_turn(
    database: Database,
    conversation_id: str,
    user_id: str,
    answer_ids: list[str],
    *,
    parent_id: str | None = None,
) -> None:
    await database.messages.create_turn(
        conversation_id,
        user_message=NewMessage(id=user_id, parts=[{"type": "text", "text": user_id}]),
        parent_id=parent_id,
        placeholders=[
            NewPlaceholder(message_id=mid, model_id=f"model-{n}")
            for n, mid in enumerate(answer_ids)
        ],
    )


async def test_finalize_writes_parts_status_metadata_and_stats(database: Database) -> None:
    conversation = await database.conversations.create()
    await start_turn(database, conversation.id, "u1", ["a1"])
    parts = [{"type": "step-start"}, {"type": "text", "text": "hi", "state": "done"}]

    await database.messages.finalize_assistant(
        "a1",
        parts=parts,
        status="success",
        metadata={"totalTokens": 7},
        stats={"timeFirstTokenMs": 12},
    )

    row = await database.messages.get("a1")
    assert row is not None
    assert (row.status, row.parts, row.metadata, row.stats) == (
        "success",
        parts,
        {"totalTokens": 7},
        {"timeFirstTokenMs": 12},
    )
    assert row.model_id == "model-0"
    assert row.updated_at > row.created_at
    assert row.as_ui_message() == {
        "id": "a1",
        "role": "assistant",
        "parts": parts,
        "metadata": {"totalTokens": 7},
    }


async def test_finalize_a_missing_row_raises(database: Database) -> None:
    with pytest.raises(PersistenceError, match="'ghost'"):
        await database.messages.finalize_assistant("ghost", parts=[], status="error")


async def test_set_pending_reopens_and_mark_error_settles_only_pending(database: Database) -> None:
    conversation = await database.conversations.create()
    await start_turn(database, conversation.id, "u1", ["a1", "a2"])
    await database.messages.finalize_assistant("a1", parts=[], status="success")

    assert await database.messages.mark_error("a1") is False  # a success is never demoted
    assert await database.messages.mark_error("a2") is True
    assert await database.messages.mark_error("ghost") is False

    approval = [{"type": "tool-search", "toolCallId": "c1", "state": "approval-responded"}]
    await database.messages.set_pending("a1", parts=approval)
    reopened = await database.messages.get("a1")
    assert reopened is not None and (reopened.status, reopened.parts) == ("pending", approval)
    assert await database.messages.mark_error("a1") is True
    settled = await database.messages.get("a1")
    assert settled is not None and (settled.status, settled.parts) == ("error", approval)
    second = await database.messages.get("a2")
    assert second is not None and second.status == "error"
    with pytest.raises(PersistenceError):
        await database.messages.set_pending("ghost", parts=[])


async def test_path_to_follows_one_branch_of_a_tree(database: Database) -> None:
    # u1 ─ a1 ─ u2 ─ a2
    #   └─ b1 ─ u3 ─ a3 (a regenerate of a1 with its own follow-up)
    #                └ a3b
    conversation = await database.conversations.create()
    await start_turn(database, conversation.id, "u1", ["a1"])
    await start_turn(database, conversation.id, "u2", ["a2"], parent_id="a1")
    await database.messages.create_turn(
        conversation.id,
        user_message=None,
        parent_id="u1",
        placeholders=[NewPlaceholder(message_id="b1", model_id="m")],
    )
    await start_turn(database, conversation.id, "u3", ["a3", "a3b"], parent_id="b1")

    async def path(message_id: str) -> list[str]:
        return [r.id for r in await database.messages.path_to(message_id)]

    assert await path("a2") == ["u1", "a1", "u2", "a2"]
    assert await path("a3") == ["u1", "b1", "u3", "a3"]
    assert await path("a3b") == ["u1", "b1", "u3", "a3b"]
    assert await path("u1") == ["u1"]
    with pytest.raises(ValidationError, match="'ghost'"):
        await database.messages.path_to("ghost")

    leaf = await database.messages.latest_leaf(conversation.id)
    assert leaf is not None and leaf.id == "a3b"
    listed = await database.messages.list_for_conversation(conversation.id)
    assert [r.id for r in listed] == ["u1", "a1", "u2", "a2", "b1", "u3", "a3", "a3b"]


async def test_latest_leaf_of_an_empty_conversation_is_none(database: Database) -> None:
    conversation = await database.conversations.create()
    assert await database.messages.latest_leaf(conversation.id) is None
    assert await database.messages.list_for_conversation(conversation.id) == []


async def test_delete_removes_rows_and_their_descendants(database: Database) -> None:
    conversation = await database.conversations.create()
    await start_turn(database, conversation.id, "u1", ["a1"])
    await start_turn(database, conversation.id, "u2", ["a2"], parent_id="a1")
    await start_turn(database, conversation.id, "u3", ["a3"], parent_id="u1")

    assert await database.messages.delete(["u2", "u2", "ghost"]) == 1
    remaining = [r.id for r in await database.messages.list_for_conversation(conversation.id)]
    assert remaining == ["u1", "a1", "u3", "a3"]
    assert await database.messages.delete([]) == 0


async def test_absent_json_is_sql_null(database: Database) -> None:
    conversation = await database.conversations.create()
    await start_turn(database, conversation.id, "u1", ["a1"])
    async with database.engine.connect() as conn:
        nulls = await conn.execute(
            text("SELECT count(*) FROM messages WHERE stats IS NULL AND metadata IS NULL")
        )
        assert nulls.scalar_one() == 2


async def test_nul_characters_never_fail_a_terminal_write(database: Database) -> None:
    conversation = await database.conversations.create()
    await start_turn(database, conversation.id, "u1", ["a1"])
    text_with_nul = "binary \x00 output, and a literal \\u0000 kept as text"

    await database.messages.finalize_assistant(
        "a1", parts=[{"type": "text", "text": text_with_nul}], status="success"
    )

    row = await database.messages.get("a1")
    assert row is not None
    # JSONB cannot hold U+0000, so PostgreSQL stores U+FFFD; SQLite keeps the text as is.
    expected = (
        text_with_nul if database.dialect == "sqlite" else text_with_nul.replace("\x00", "\ufffd")
    )
    assert row.parts == [{"type": "text", "text": expected}]


async def test_set_parent_moves_a_row_within_its_conversation_only(database: Database) -> None:
    conversation = await database.conversations.create()
    other = await database.conversations.create()
    await start_turn(database, conversation.id, "u1", ["a1"])
    await start_turn(database, conversation.id, "u2", ["a2"], parent_id="a1")
    await start_turn(database, other.id, "x1", ["y1"])
    await database.messages.create_user_message(
        conversation.id,
        message=NewMessage(id="u3", parts=[{"type": "text", "text": "u3"}]),
        parent_id="u2",
    )

    await database.messages.set_parent("u3", "a2")
    path = await database.messages.path_to("u3")
    assert [r.id for r in path] == ["u1", "a1", "u2", "a2", "u3"]
    with pytest.raises(ValidationError, match="descends"):
        await database.messages.set_parent("u2", "u3")
    with pytest.raises(ValidationError, match="within its conversation"):
        await database.messages.set_parent("u3", "y1")
    assert [r.id for r in await database.messages.path_to("u3")] == [r.id for r in path]
