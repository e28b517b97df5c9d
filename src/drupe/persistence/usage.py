"""``UsageStore``: answers and tokens per day, per model and per conversation.

Reads what the persistence listener already stores: every settled assistant row (``success``,
``paused`` or ``error``; never ``pending``) with its ``stats.usage`` (``inputTokens``,
``outputTokens``, as the UI stream's message metadata reported them). A row without usage
counts as an answer with zero tokens. Days are UTC calendar days. One read transaction; the
folding happens here in Python, so the same code runs on SQLite and PostgreSQL (their JSON and
date functions differ). ``usage_window(since, until, days, today)`` turns a query's window into
inclusive UTC days (at most ``MAX_DAYS``) or a ``ValidationError`` that says what is wrong; the
HTTP route and the CLI share it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy import select

from drupe.errors import ValidationError
from drupe.persistence.tables import ConversationRow, MessageRow
from drupe.persistence.transaction import Transactions

__all__ = [
    "DEFAULT_DAYS",
    "MAX_DAYS",
    "UsageCount",
    "UsageStore",
    "UsageSummary",
    "summarize",
    "usage_window",
]

MAX_DAYS = 366
DEFAULT_DAYS = 30


def usage_window(
    since: date | None, until: date | None, days: int | None, today: date
) -> tuple[date, date]:
    """The inclusive UTC days of a usage query; ``ValidationError`` says what is wrong."""
    last = until or today
    if since is not None and days is not None:
        raise ValidationError("give either since or days, not both")
    try:
        first = since if since is not None else last - timedelta(days=(days or DEFAULT_DAYS) - 1)
    except OverflowError:
        raise ValidationError(f"the window starts before year 1 (until {last})") from None
    if first > last:
        raise ValidationError(f"since ({first.isoformat()}) is after until ({last.isoformat()})")
    if (last - first).days + 1 > MAX_DAYS:
        raise ValidationError(f"the window is {(last - first).days + 1} days; at most {MAX_DAYS}")
    return first, last


@dataclass(slots=True)
class UsageCount:
    """Answers and tokens of one group (a day, a model or a conversation)."""

    key: str
    answers: int = 0
    errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    title: str | None = None
    """Conversations only: the conversation's title."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, status: str, usage: Mapping[str, Any]) -> None:
        self.answers += 1
        self.errors += status == "error"
        self.input_tokens += _tokens(usage, "inputTokens")
        self.output_tokens += _tokens(usage, "outputTokens")


@dataclass(frozen=True, slots=True)
class UsageSummary:
    """A window of usage: every day in it (zeros included), and the models and conversations."""

    since: date
    until: date
    """Inclusive: the last day of the window."""
    totals: UsageCount
    days: list[UsageCount]
    models: list[UsageCount]
    conversations: list[UsageCount]
    conversations_total: int = 0
    """How many conversations had answers (``conversations`` may hold only the top ones)."""


def _tokens(usage: Mapping[str, Any], key: str) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def summarize(
    rows: Iterable[tuple[datetime, str | None, str, str, Mapping[str, Any] | None]],
    *,
    since: date,
    until: date,
    top_conversations: int = 20,
) -> UsageSummary:
    """Fold ``(created_at, model_id, conversation_id, status, stats)`` rows into a summary.

    Rows outside ``since..until`` (UTC days, inclusive) are ignored. Models and conversations
    are ordered by total tokens, then answers, then key; conversations keep the top
    ``top_conversations``.
    """
    days = {since + timedelta(n): UsageCount(key=(since + timedelta(n)).isoformat())
            for n in range((until - since).days + 1)}  # fmt: skip
    models: dict[str, UsageCount] = {}
    conversations: dict[str, UsageCount] = {}
    totals = UsageCount(key="total")
    for created_at, model_id, conversation_id, status, stats in rows:
        day = days.get(created_at.astimezone(UTC).date())
        if day is None:
            continue
        raw = (stats or {}).get("usage")
        usage: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        model = model_id or "unknown"
        for count in (
            day,
            totals,
            models.setdefault(model, UsageCount(key=model)),
            conversations.setdefault(conversation_id, UsageCount(key=conversation_id)),
        ):
            count.add(status, usage)

    def ranked(counts: Iterable[UsageCount]) -> list[UsageCount]:
        return sorted(counts, key=lambda c: (-c.total_tokens, -c.answers, c.key))

    return UsageSummary(
        since=since,
        until=until,
        totals=totals,
        days=[days[d] for d in sorted(days)],
        models=ranked(models.values()),
        conversations=ranked(conversations.values())[:top_conversations],
        conversations_total=len(conversations),
    )


class UsageStore:
    """Usage read from the messages table. Safe to share between tasks."""

    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions

    async def summary(
        self,
        *,
        since: date,
        until: date,
        top_conversations: int = 20,
        owner_id: str | None = None,
    ) -> UsageSummary:
        """Usage of the UTC days ``since..until`` (inclusive); with ``owner_id``, of that user's
        conversations only."""
        start = datetime(since.year, since.month, since.day, tzinfo=UTC)
        end = datetime(until.year, until.month, until.day, tzinfo=UTC) + timedelta(days=1)
        query = (
            select(
                MessageRow.created_at,
                MessageRow.model_id,
                MessageRow.conversation_id,
                MessageRow.status,
                MessageRow.stats,
            )
            .where(MessageRow.role == "assistant")
            .where(MessageRow.status != "pending")
            .where(MessageRow.created_at >= start)
            .where(MessageRow.created_at < end)
        )
        if owner_id is not None:
            owned = select(ConversationRow.id).where(ConversationRow.owner_id == owner_id)
            query = query.where(MessageRow.conversation_id.in_(owned))
        async with self._transactions.read() as db:
            result = await db.execute(query)
            rows = [
                (r.created_at, r.model_id, r.conversation_id, r.status, r.stats) for r in result
            ]
            summary = summarize(
                rows,
                since=since,
                until=until,
                top_conversations=top_conversations,
            )
            ids = [c.key for c in summary.conversations]
            if ids:
                found = await db.execute(
                    select(ConversationRow.id, ConversationRow.title).where(
                        ConversationRow.id.in_(ids)
                    )
                )
                titles = {row.id: row.title for row in found}
                for count in summary.conversations:
                    count.title = titles.get(count.key)
        return summary
