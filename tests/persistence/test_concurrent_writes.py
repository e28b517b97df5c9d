"""Concurrent writers: turns from many tasks all land, and sibling group ids never repeat.

On SQLite this exercises the pool of WAL connections with ``busy_timeout`` (every store
transaction writes first, so no transaction has to upgrade a read lock); on PostgreSQL the row
lock taken by ``UPDATE ... RETURNING``.
"""

from __future__ import annotations

import anyio
import pytest
from sqlalchemy import text

from drupe.persistence import Database, NewMessage, NewPlaceholder

TASKS = 40
CONVERSATIONS = 5


@pytest.mark.slow
async def test_concurrent_turns_all_land(database: Database) -> None:
    conversations = [(await database.conversations.create()).id for _ in range(CONVERSATIONS)]
    groups: dict[str, list[int]] = {c: [] for c in conversations}

    async def turn(n: int) -> None:
        conversation_id = conversations[n % CONVERSATIONS]
        group = await database.messages.next_siblings_group_id(conversation_id)
        groups[conversation_id].append(group)
        await database.messages.create_turn(
            conversation_id,
            user_message=NewMessage(id=f"u{n}", parts=[{"type": "text", "text": str(n)}]),
            parent_id=None,
            placeholders=[
                NewPlaceholder(message_id=f"a{n}", model_id="m1"),
                NewPlaceholder(message_id=f"b{n}", model_id="m2"),
            ],
            siblings_group_id=group,
        )
        await database.messages.finalize_assistant(f"a{n}", parts=[], status="success")

    async with anyio.create_task_group() as tg:
        for n in range(TASKS):
            tg.start_soon(turn, n)

    per_conversation = TASKS // CONVERSATIONS
    for conversation_id in conversations:
        assert sorted(groups[conversation_id]) == list(range(1, per_conversation + 1))
        rows = await database.messages.list_for_conversation(conversation_id)
        assert len(rows) == 3 * per_conversation
    assert await database.messages.reconcile_pending() == TASKS
    async with database.engine.connect() as conn:
        counts = (
            await conn.execute(text("SELECT status, count(*) FROM messages GROUP BY status"))
        ).all()
    assert dict(counts) == {"success": 2 * TASKS, "error": TASKS}
