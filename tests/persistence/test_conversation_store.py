"""Conversations: create, read, list with a cursor, rename, touch, delete (cascading)."""

from __future__ import annotations

import pytest

from drupe.errors import UnknownConversationError, ValidationError
from drupe.persistence import Database, NewMessage, NewPlaceholder


async def test_create_get_rename_touch(database: Database) -> None:
    created = await database.conversations.create("c1", title="first", metadata={"k": 1})
    assert created.id == "c1" and created.title == "first" and created.metadata == {"k": 1}
    assert created.created_at == created.updated_at
    assert created.created_at.utcoffset() is not None
    assert await database.conversations.get("c1") == created

    renamed = await database.conversations.rename("c1", "second")
    assert renamed.title == "second" and renamed.updated_at > created.updated_at
    touched = await database.conversations.touch("c1")
    assert touched.updated_at > renamed.updated_at and touched.title == "second"
    traced = await database.conversations.set_trace_id("c1", "abc123")
    assert traced.trace_id == "abc123"
    assert await database.conversations.get("c1") == traced

    generated = await database.conversations.create()
    assert generated.id.startswith("conv_") and generated.title is None


async def test_unknown_and_duplicate_conversations(database: Database) -> None:
    assert await database.conversations.get("nope") is None
    for call in (
        database.conversations.rename("nope", "x"),
        database.conversations.touch("nope"),
        database.conversations.delete("nope"),
    ):
        with pytest.raises(UnknownConversationError):
            await call
    await database.conversations.create("c1", title="kept")
    with pytest.raises(ValidationError, match="already exists"):
        await database.conversations.create("c1", title="other")
    kept = await database.conversations.get("c1")
    assert kept is not None and kept.title == "kept"


async def test_ensure_creates_once(database: Database) -> None:
    first = await database.conversations.ensure("c1", title="a")
    second = await database.conversations.ensure("c1", title="b")
    assert first == second and second.title == "a"


async def test_list_newest_updated_first_with_cursor(database: Database) -> None:
    for n in range(5):
        await database.conversations.create(f"c{n}")
    await database.conversations.touch("c1")

    page = await database.conversations.list(limit=2)
    assert [c.id for c in page] == ["c1", "c4"]
    page = await database.conversations.list(limit=2, before=page[-1].cursor)
    assert [c.id for c in page] == ["c3", "c2"]
    page = await database.conversations.list(limit=2, before=page[-1].cursor)
    assert [c.id for c in page] == ["c0"]
    assert await database.conversations.list(limit=2, before=page[-1].cursor) == []

    with pytest.raises(ValidationError):
        await database.conversations.list(limit=0)
    with pytest.raises(ValidationError, match="cursor"):
        await database.conversations.list(before="not-a-cursor")


async def test_delete_cascades_to_messages(database: Database) -> None:
    doomed = await database.conversations.create()
    kept = await database.conversations.create()
    for conversation, suffix in ((doomed, "d"), (kept, "k")):
        await database.messages.create_turn(
            conversation.id,
            user_message=NewMessage(id=f"u-{suffix}", parts=[]),
            parent_id=None,
            placeholders=[NewPlaceholder(message_id=f"a-{suffix}", model_id="m")],
        )

    await database.conversations.delete(doomed.id)

    assert await database.conversations.get(doomed.id) is None
    assert await database.messages.get("u-d") is None
    assert await database.messages.get("a-d") is None
    assert len(await database.messages.list_for_conversation(kept.id)) == 2
