"""``ConversationStore.set_metadata_key`` and ``title_if_untitled`` on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from drupe.errors import UnknownConversationError
from drupe.persistence import Database


async def test_one_metadata_key_changes_and_the_rest_stays(database: Database) -> None:
    created = await database.conversations.create(metadata={"keep": 1})
    record = await database.conversations.set_metadata_key(created.id, "branch", {"leaf": "m2"})
    assert dict(record.metadata) == {"keep": 1, "branch": {"leaf": "m2"}}
    stored = await database.conversations.get(created.id)
    assert stored is not None and dict(stored.metadata) == {"keep": 1, "branch": {"leaf": "m2"}}
    record = await database.conversations.set_metadata_key(created.id, "branch", None)
    assert dict(record.metadata) == {"keep": 1}
    with pytest.raises(UnknownConversationError):
        await database.conversations.set_metadata_key("nope", "k", 1)


async def test_title_if_untitled_never_overwrites(database: Database) -> None:
    untitled = await database.conversations.create()
    assert await database.conversations.title_if_untitled(untitled.id, "first") is True
    assert await database.conversations.title_if_untitled(untitled.id, "second") is False
    stored = await database.conversations.get(untitled.id)
    assert stored is not None and stored.title == "first"
    assert stored.updated_at == untitled.updated_at  # a title is not activity
    assert await database.conversations.title_if_untitled("nope", "x") is False
