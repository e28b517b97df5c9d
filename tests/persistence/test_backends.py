"""Persistence backends: the placeholder row is finalized through the listener's protocol.

``PlaceholderBackend`` is typed against the real ``PersistenceBackend`` protocol of the
persistence listener (mypy checks the assignment in ``test_placeholder_backend_finalizes_its_row``).
"""

from __future__ import annotations

import logging

import pytest

from drupe.chunks.types import UIMessage
from drupe.errors import PersistenceError
from drupe.persistence import (
    Database,
    NewMessage,
    NewPlaceholder,
    PlaceholderBackend,
)
from drupe.streaming.listeners.persistence import PersistenceBackend


async def _placeholder(database: Database) -> PlaceholderBackend:
    conversation = await database.conversations.create()
    await database.messages.create_turn(
        conversation.id,
        user_message=NewMessage(id="u1", parts=[{"type": "text", "text": "q"}]),
        parent_id=None,
        placeholders=[NewPlaceholder(message_id="a1", model_id="m1")],
    )
    return PlaceholderBackend(database.messages, "a1")


async def test_placeholder_backend_finalizes_its_row(database: Database) -> None:
    backend: PersistenceBackend = await _placeholder(database)
    assert backend.kind == database.dialect
    assert backend.persists_empty_terminal is True
    message: UIMessage = {
        "id": "synthetic-id",
        "role": "assistant",
        "parts": [{"type": "text", "text": "answer", "state": "done"}],
        "metadata": {"totalTokens": 3},
    }

    await backend.persist_assistant(
        message=message, status="paused", model_id="m1", stats={"timeCompletionMs": 40}
    )

    row = await database.messages.get("a1")
    assert row is not None
    assert row.status == "paused"
    assert row.parts == message["parts"]
    assert row.metadata == {"totalTokens": 3}
    assert row.stats == {"timeCompletionMs": 40}
    assert await database.messages.get("synthetic-id") is None


async def test_placeholder_backend_errors(database: Database) -> None:
    backend = await _placeholder(database)
    await backend.mark_terminal_error()
    row = await database.messages.get("a1")
    assert row is not None and row.status == "error"
    user_row = await database.messages.get("u1")
    assert user_row is not None and user_row.status == "success"  # only the placeholder moved

    await database.messages.delete(["a1"])
    gone = PlaceholderBackend(database.messages, "a1")
    with pytest.raises(PersistenceError):
        await gone.persist_assistant(
            message={"id": "a1", "role": "assistant", "parts": []},
            status="success",
            model_id=None,
            stats={},
        )
    await gone.mark_terminal_error()  # best effort: a missing row is not an error
    assert await database.messages.get("a1") is None  # and it is not brought back


async def test_mark_terminal_error_leaves_a_finished_row_alone(database: Database) -> None:
    backend = await _placeholder(database)
    await backend.persist_assistant(
        message={"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": "ok"}]},
        status="success",
        model_id="m1",
        stats={},
    )
    await backend.mark_terminal_error()  # only a row still pending moves to error
    row = await database.messages.get("a1")
    assert row is not None and row.status == "success"
    assert row.parts == [{"type": "text", "text": "ok"}]


async def test_placeholder_backend_mark_error_never_raises(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    backend = await _placeholder(database)
    async with database.engine.begin() as conn:
        await conn.exec_driver_sql("ALTER TABLE messages RENAME TO messages_gone")
    with caplog.at_level(logging.WARNING, logger="drupe.persistence.backends"):
        await backend.mark_terminal_error()  # the UPDATE fails; the backend swallows it
    assert "could not mark message 'a1' as error" in caplog.text
    async with database.engine.begin() as conn:
        await conn.exec_driver_sql("ALTER TABLE messages_gone RENAME TO messages")
    row = await database.messages.get("a1")
    assert row is not None and row.status == "pending"  # the failed write changed nothing
