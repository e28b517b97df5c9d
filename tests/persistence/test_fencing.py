"""Cluster fencing of row writes and the takeover of a lost owner's rows (SQLite and
PostgreSQL): an owner whose token is below the row's writes nothing; ``fence=None`` is the
single-node behaviour."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from sqlalchemy import text

from drupe.errors import FencedWriteError, PersistenceError
from drupe.persistence import (
    Database,
    FencedCheckpoints,
    MessageRecord,
    NewMessage,
    NewPlaceholder,
    PlaceholderBackend,
    takeover,
)

LOST = "node n1 was lost"
ERROR_PART = {"type": "data-error", "data": {"name": "NodeLost", "message": LOST}}
PARTIAL = [{"type": "step-start"}, {"type": "text", "text": "half an answ", "state": "streaming"}]
FINAL = [{"type": "text", "text": "the whole answer", "state": "done"}]


def _json(parts: list[dict[str, Any]]) -> str:
    return orjson.dumps(parts).decode()


async def _turn(database: Database, *rows: str, fence: int | None = 1) -> str:
    conversation = await database.conversations.create()
    await database.messages.create_turn(
        conversation.id,
        user_message=NewMessage(id=f"u-{rows[0]}", parts=[{"type": "text", "text": "q"}]),
        parent_id=None,
        placeholders=[NewPlaceholder(message_id=r, model_id=f"m-{r}") for r in rows],
        fence=fence,
    )
    return conversation.id


async def _row(database: Database, message_id: str) -> MessageRecord:
    row = await database.messages.get(message_id)
    assert row is not None
    return row


async def test_turn_rows_store_the_owners_fence(database: Database) -> None:
    conversation = await _turn(database, "a1", "a2", fence=7)
    rows = await database.messages.list_for_conversation(conversation)
    assert {(r.id, r.fence) for r in rows} == {("u-a1", 7), ("a1", 7), ("a2", 7)}
    placeholder = await database.messages.create_placeholder(
        conversation, message_id="a3", parent_id="u-a1", model_id="m", fence=8
    )
    assert placeholder.fence == 8 and (await _row(database, "a3")).fence == 8
    steer = await database.messages.create_user_message(
        conversation,
        message=NewMessage(id="s1", parts=[{"type": "text", "text": "and"}]),
        parent_id="a1",
        fence=8,
    )
    assert steer.fence == 8


async def test_a_stale_owner_writes_nothing_after_a_take_over(database: Database) -> None:
    conversation = await _turn(database, "a1", fence=1)
    await database.messages.write_checkpoints([("a1", _json(PARTIAL))], fence=1)

    assert await database.messages.take_over(conversation, fence=2, reason=LOST) == ["a1"]
    taken = await _row(database, "a1")
    assert (taken.status, taken.fence) == ("error", 2)

    # The old owner (token 1) wakes up: every kind of write is refused and changes nothing.
    with pytest.raises(FencedWriteError, match="newer owner holds the conversation") as refused:
        await database.messages.finalize_assistant("a1", parts=FINAL, status="success", fence=1)
    assert isinstance(refused.value, PersistenceError)
    assert (refused.value.message_id, refused.value.fence) == ("a1", 1)
    with pytest.raises(FencedWriteError):
        await database.messages.set_pending("a1", parts=FINAL, fence=1)
    assert await database.messages.mark_error("a1", fence=1) is False
    await database.messages.write_checkpoints([("a1", _json(FINAL))], fence=1)
    assert await _row(database, "a1") == taken


async def test_the_current_owner_writes_and_a_newer_one_fences_it(database: Database) -> None:
    conversation = await _turn(database, "a1", fence=1)
    await database.messages.take_over(conversation, fence=2, reason=LOST)

    # The successor (token 2) reopens the row, checkpoints it and finalizes it.
    await database.messages.set_pending("a1", parts=PARTIAL, fence=2)
    changed = await database.messages.write_checkpoints([("a1", _json(FINAL))], fence=2)
    row = await _row(database, "a1")
    assert (row.status, row.parts, row.fence) == ("pending", FINAL, 2)
    if database.dialect == "sqlite":  # asyncpg reports no executemany count
        assert changed == 1
    await database.messages.finalize_assistant("a1", parts=FINAL, status="success", fence=2)
    assert (await _row(database, "a1")).status == "success"

    # A later owner (token 3) writes and stores its token; then token 2 is refused.
    await database.messages.set_pending("a1", parts=[], fence=3)
    assert await database.messages.mark_error("a1", fence=2) is False
    assert await database.messages.mark_error("a1", fence=3) is True
    row = await _row(database, "a1")
    assert (row.status, row.fence) == ("error", 3)
    with pytest.raises(FencedWriteError):
        await database.messages.finalize_assistant("a1", parts=FINAL, status="success", fence=2)


async def test_an_unfenced_row_accepts_any_token_and_stores_it(database: Database) -> None:
    await _turn(database, "a1", fence=None)
    assert (await _row(database, "a1")).fence is None
    await database.messages.write_checkpoints([("a1", _json(PARTIAL))], fence=5)
    row = await _row(database, "a1")
    assert (row.parts, row.fence) == (PARTIAL, 5)


async def test_writes_without_a_fence_behave_as_before(database: Database) -> None:
    await _turn(database, "a1", "a2", fence=None)
    await database.messages.write_checkpoints([("a1", _json(PARTIAL))])
    assert (await _row(database, "a1")).parts == PARTIAL
    await database.messages.finalize_assistant("a1", parts=FINAL, status="success")
    assert await database.messages.mark_error("a1") is False  # settled rows are never demoted
    assert await database.messages.mark_error("a2") is True
    await database.messages.set_pending("a2", parts=PARTIAL)
    rows = [await _row(database, "a1"), await _row(database, "a2")]
    assert [(r.status, r.parts, r.fence) for r in rows] == [
        ("success", FINAL, None),
        ("pending", PARTIAL, None),
    ]
    # A missing row is still a plain PersistenceError, fenced or not.
    for fence in (None, 1):
        with pytest.raises(PersistenceError, match="does not exist") as missing:
            await database.messages.finalize_assistant(
                "nope", parts=[], status="error", fence=fence
            )
        assert not isinstance(missing.value, FencedWriteError)
    assert await database.messages.mark_error("nope", fence=1) is False


async def test_take_over_keeps_checkpointed_parts_closed_with_one_error_part(
    database: Database,
) -> None:
    conversation = await _turn(database, "crashed", "empty", "done", fence=1)
    old_error = {"type": "data-error", "data": {"name": "StreamError", "message": "x"}}
    checkpointed = [
        {"type": "step-start"},
        {"type": "reasoning", "text": "thinking", "state": "streaming"},
        {"type": "tool-search", "toolCallId": "c1", "state": "input-available", "input": {}},
        old_error,
        {"type": "text", "text": "half an answ", "state": "streaming"},
        {"type": "text", "text": "", "state": "streaming"},
    ]
    await database.messages.write_checkpoints([("crashed", _json(checkpointed))], fence=1)
    await database.messages.finalize_assistant("done", parts=FINAL, status="success", fence=1)
    before = await _row(database, "done")

    changed = await database.messages.take_over(conversation, fence=2, reason=LOST)

    assert changed == ["crashed", "empty"]
    crashed = await _row(database, "crashed")
    assert (crashed.status, crashed.fence) == ("error", 2)
    assert crashed.parts == [
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
        ERROR_PART,
    ]
    empty = await _row(database, "empty")
    assert (empty.status, empty.parts, empty.fence) == ("error", [ERROR_PART], 2)
    assert await _row(database, "done") == before
    assert (await _row(database, "u-crashed")).status == "success"


async def test_take_over_keeps_the_rebuilt_answer_instead_of_an_older_checkpoint(
    database: Database,
) -> None:
    conversation = await _turn(database, "rebuilt", "kept", "never", fence=1)
    await database.messages.write_checkpoints(
        [("rebuilt", _json(PARTIAL)), ("kept", _json(PARTIAL))], fence=1
    )  # "never" has no checkpoint yet: the log is all there is
    from_log = [
        {"type": "step-start"},
        {"type": "text", "text": "half an answer, and more", "state": "streaming"},
    ]
    changed = await database.messages.take_over(
        conversation,
        fence=2,
        reason=LOST,
        rebuilt={"rebuilt": from_log, "never": from_log, "elsewhere": FINAL},
    )
    assert changed == ["kept", "never", "rebuilt"]
    never = await _row(database, "never")
    assert never.parts == (await _row(database, "rebuilt")).parts
    rebuilt = await _row(database, "rebuilt")
    assert (rebuilt.status, rebuilt.fence) == ("error", 2)
    assert rebuilt.parts == [
        {"type": "step-start"},
        {"type": "text", "text": "half an answer, and more", "state": "done"},
        ERROR_PART,
    ]
    kept = await _row(database, "kept")
    assert kept.parts == [
        {"type": "step-start"},
        {"type": "text", "text": "half an answ", "state": "done"},
        ERROR_PART,
    ]


async def test_take_over_touches_only_that_conversations_pending_rows(database: Database) -> None:
    mine = await _turn(database, "a1", fence=1)
    other = await _turn(database, "b1", fence=1)
    unfenced = await _turn(database, "c1", fence=None)
    before = {m: await _row(database, m) for m in ("b1", "c1", "u-a1")}

    assert await database.messages.take_over(mine, fence=2, reason=LOST) == ["a1"]

    assert {m: await _row(database, m) for m in ("b1", "c1", "u-a1")} == before
    # A single-node row (fence NULL) is taken over like any older owner's.
    assert await database.messages.take_over(unfenced, fence=1, reason=LOST) == ["c1"]
    assert (await _row(database, "c1")).parts == [ERROR_PART]
    assert await database.messages.pending_conversations() == [other]


async def test_a_take_over_with_an_older_or_equal_token_changes_nothing(
    database: Database,
) -> None:
    conversation = await _turn(database, "a1", fence=1)
    assert await database.messages.take_over(conversation, fence=3, reason=LOST) == ["a1"]
    # The new owner (token 3) starts a turn of its own in the same conversation.
    await database.messages.create_placeholder(
        conversation, message_id="a2", parent_id="u-a1", model_id="m", fence=3
    )
    before = await database.messages.list_for_conversation(conversation)

    assert await database.messages.take_over(conversation, fence=2, reason="late") == []
    assert await database.messages.take_over(conversation, fence=3, reason="again") == []

    assert await database.messages.list_for_conversation(conversation) == before
    assert (await _row(database, "a2")).status == "pending"


async def test_pending_conversations_lists_conversations_with_pending_answers(
    database: Database,
) -> None:
    assert await database.messages.pending_conversations() == []
    first = await _turn(database, "p0", fence=None)
    live = sorted([first] + [await _turn(database, f"p{n}", fence=None) for n in (1, 2)])
    settled = await _turn(database, "s1", fence=None)
    await database.messages.finalize_assistant("s1", parts=FINAL, status="success")
    await database.conversations.create()  # no rows at all
    await database.messages.create_placeholder(
        first, message_id="p0-b", parent_id="u-p0", model_id="m2"
    )

    assert await database.messages.pending_conversations() == live
    assert await database.messages.pending_conversations(limit=2) == live[:2]
    assert settled not in await database.messages.pending_conversations()
    await database.messages.reconcile_pending()
    assert await database.messages.pending_conversations() == []


async def test_placeholder_backend_writes_fenced(database: Database) -> None:
    conversation = await _turn(database, "a1", "a2", fence=1)
    stale = PlaceholderBackend(database.messages, "a1", fence=1)
    sibling = PlaceholderBackend(database.messages, "a2", fence=1)
    target = stale.checkpoint_target
    assert target is not None
    sink, key = target
    assert key == "a1" and isinstance(sink, FencedCheckpoints) and sink.fence == 1
    other = sibling.checkpoint_target
    assert other is not None and other[0] is sink  # rows of one token share one batch

    await sink.write_checkpoints([("a1", _json(PARTIAL)), ("a2", _json(PARTIAL))])
    assert (await _row(database, "a1")).parts == PARTIAL
    await database.messages.take_over(conversation, fence=2, reason=LOST)
    taken = await _row(database, "a1")

    await sink.write_checkpoints([("a1", _json(FINAL))])
    with pytest.raises(FencedWriteError):
        await stale.persist_assistant(
            message={"id": "a1", "role": "assistant", "parts": FINAL},
            status="success",
            model_id="m-a1",
            stats={},
        )
    assert await stale.mark_terminal_error() is True  # the row has left pending (taken over)
    assert await _row(database, "a1") == taken

    owner = PlaceholderBackend(database.messages, "a1", fence=2)
    await owner.persist_assistant(
        message={"id": "a1", "role": "assistant", "parts": FINAL},
        status="success",
        model_id="m-a1",
        stats={},
    )
    row = await _row(database, "a1")
    assert (row.status, row.parts, row.fence) == ("success", FINAL, 2)


async def test_an_unfenced_backend_checkpoints_through_the_store(database: Database) -> None:
    await _turn(database, "a1", fence=None)
    backend = PlaceholderBackend(database.messages, "a1")
    assert backend.checkpoint_target == (database.messages, "a1")


# SQLite's planner only: PostgreSQL chooses its plan by table statistics, so there is no plan
# to assert there; the test runs on the SQLite target alone (no skipped PostgreSQL variant).
@pytest.mark.parametrize("target", ["sqlite"], indirect=True)
async def test_sqlite_finds_pending_rows_through_the_partial_index(database: Database) -> None:
    assert database.dialect == "sqlite"
    plans = []
    async with database.engine.connect() as conn:
        for sql, params in (
            (takeover._PENDING_CONVERSATIONS_SQL, {"limit": 10}),
            (
                takeover.SQLITE_TAKEOVER_SQL,
                {"now": "x", "fence": 2, "part": "{}", "conversation_id": "c"},
            ),
        ):
            rows = (await conn.execute(text(f"EXPLAIN QUERY PLAN {sql}"), params)).all()
            plans.append(" ".join(str(row[-1]) for row in rows))
    assert all("USING INDEX ix_messages_pending" in plan for plan in plans), plans
