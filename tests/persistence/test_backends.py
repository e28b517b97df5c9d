"""Persistence backends: the placeholder row is finalized through the listener's protocol."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

import pytest

from drupe.chunks.types import UIMessage
from drupe.errors import PersistenceError
from drupe.persistence import (
    Database,
    MemoryBackend,
    NewMessage,
    NewPlaceholder,
    PlaceholderBackend,
)


class PersistenceBackend(Protocol):
    """The listener-side protocol, restated here (persistence must not import streaming)."""

    kind: str
    persists_empty_terminal: bool

    async def persist_assistant(
        self,
        *,
        message: UIMessage,
        status: Literal["success", "paused", "error"],
        model_id: str | None,
        stats: Mapping[str, Any],
    ) -> None: ...

    async def mark_terminal_error(self) -> None: ...


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


async def test_placeholder_backend_mark_error_never_raises(database: Database) -> None:
    backend = await _placeholder(database)
    async with database.engine.begin() as conn:
        await conn.exec_driver_sql("ALTER TABLE messages RENAME TO messages_gone")
    await backend.mark_terminal_error()  # the UPDATE fails; the backend swallows it


async def test_memory_backend_records_terminals() -> None:
    backend: PersistenceBackend = MemoryBackend()
    message: UIMessage = {"id": "m", "role": "assistant", "parts": []}
    await backend.persist_assistant(message=message, status="success", model_id=None, stats={})
    await backend.mark_terminal_error()
    assert isinstance(backend, MemoryBackend)
    assert backend.kind == "memory" and backend.persists_empty_terminal is False
    assert [t.status for t in backend.terminals] == ["success"]
    assert backend.marked_error == 1
