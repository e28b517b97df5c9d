"""``UsageStore.summary``: answers and tokens per UTC day, model and conversation (both DBs)."""

from __future__ import annotations

from datetime import UTC, date, datetime

from sqlalchemy import update

from drupe.persistence import Database, NewMessage, NewPlaceholder
from drupe.persistence.tables import MessageRow
from drupe.persistence.usage import summarize


async def answer(
    database: Database,
    conversation_id: str,
    answer_id: str,
    *,
    model: str,
    at: datetime,
    status: str = "success",
    usage: dict[str, int] | None = None,
) -> None:
    """One turn whose answer settled with ``usage``, its rows moved to the time ``at``."""
    await database.messages.create_turn(
        conversation_id,
        user_message=NewMessage(id=f"u-{answer_id}", parts=[{"type": "text", "text": "q"}]),
        parent_id=None,
        placeholders=[NewPlaceholder(message_id=answer_id, model_id=model)],
    )
    if status != "pending":
        await database.messages.finalize_assistant(
            answer_id,
            parts=[{"type": "text", "text": "a"}],
            status=status,  # type: ignore[arg-type]
            stats={"usage": usage} if usage is not None else {"timeFirstChunkMs": 3.0},
        )
    async with database.sessions.begin() as db:
        await db.execute(
            update(MessageRow)
            .where(MessageRow.id.in_([answer_id, f"u-{answer_id}"]))
            .values(created_at=at)
        )


def day(d: int, hour: int = 12) -> datetime:
    return datetime(2026, 3, d, hour, tzinfo=UTC)


async def test_summary_groups_by_day_model_and_conversation(database: Database) -> None:
    first = await database.conversations.create("c-first", title="First")
    second = await database.conversations.create("c-second")
    await answer(database, first.id, "a1", model="m:big", at=day(2, 0),
                 usage={"inputTokens": 10, "outputTokens": 5})  # fmt: skip
    await answer(database, first.id, "a2", model="m:big", at=day(2, 23),
                 usage={"inputTokens": 20, "outputTokens": 7})  # fmt: skip
    await answer(database, second.id, "a3", model="m:small", at=day(4),
                 usage={"inputTokens": 1, "outputTokens": 2})  # fmt: skip
    await answer(database, second.id, "a4", model="m:small", at=day(4), status="error")
    await answer(database, second.id, "a5", model="m:small", at=day(4), status="pending")
    await answer(database, second.id, "a6", model="m:small", at=day(5),
                 usage={"inputTokens": 100, "outputTokens": 100})  # fmt: skip

    summary = await database.usage.summary(since=date(2026, 3, 1), until=date(2026, 3, 4))

    assert [(d.key, d.answers, d.input_tokens, d.output_tokens) for d in summary.days] == [
        ("2026-03-01", 0, 0, 0),
        ("2026-03-02", 2, 30, 12),
        ("2026-03-03", 0, 0, 0),
        ("2026-03-04", 2, 1, 2),  # a4 failed without usage; a5 is still pending; a6 is later
    ]
    assert [(m.key, m.answers, m.errors, m.total_tokens) for m in summary.models] == [
        ("m:big", 2, 0, 42),
        ("m:small", 2, 1, 3),
    ]
    assert [(c.key, c.title, c.answers, c.total_tokens) for c in summary.conversations] == [
        ("c-first", "First", 2, 42),
        ("c-second", None, 2, 3),
    ]
    totals = summary.totals
    assert (totals.answers, totals.errors, totals.total_tokens) == (4, 1, 45)
    assert summary.conversations_total == 2


def test_summarize_ignores_rows_outside_the_window_and_bad_usage() -> None:
    rows = [
        (day(1), "m", "c1", "success", {"usage": {"inputTokens": 3, "outputTokens": 4}}),
        (day(2), "m", "c1", "success", {"usage": {"inputTokens": "x", "outputTokens": True}}),
        (day(2), None, "c2", "paused", None),
        (day(9), "m", "c3", "success", {"usage": {"inputTokens": 50}}),
    ]
    summary = summarize(rows, since=date(2026, 3, 1), until=date(2026, 3, 2), top_conversations=1)
    assert [(d.key, d.answers, d.total_tokens) for d in summary.days] == [
        ("2026-03-01", 1, 7),
        ("2026-03-02", 2, 0),
    ]
    assert [(m.key, m.answers) for m in summary.models] == [("m", 2), ("unknown", 1)]
    assert [c.key for c in summary.conversations] == ["c1"]
    assert summary.conversations_total == 2
