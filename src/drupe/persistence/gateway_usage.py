"""``GatewayUsageStore``: gateway requests and tokens per UTC day, key, user, model and dialect.

Contract:

* ``add(deltas)`` adds each ``UsageDelta`` to its group's row in one write transaction: an
  ``INSERT … ON CONFLICT (id) DO UPDATE`` that adds the counters, on SQLite and PostgreSQL
  alike, so concurrent writers (nodes of a cluster) never lose a count (rows are written in
  id order, so two writers never deadlock). A group is
  ``(day, key_id, owner_id, model, dialect)``; its row id is the SHA-256 of those columns, so
  NULL keys and owners group as well. Deltas of one group in one call are merged first.
* ``rows(since, until, owner_id=None)`` returns the stored groups of the UTC days
  ``since..until`` (inclusive), of one owner when given; ``summarize`` folds them into totals
  per day (zeros included), key, user, model and dialect.

Never stores a key's secret: only its id (listings name keys by their name and prefix).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import date, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.dialects import postgresql, sqlite

from drupe.persistence.clock import utc_now
from drupe.persistence.tables import GatewayUsageRow
from drupe.persistence.transaction import Transactions

__all__ = [
    "GatewayCount",
    "GatewayUsageStore",
    "GatewayUsageSummary",
    "UsageDelta",
    "summarize_gateway",
]

MODEL_CHARS = 255
DIALECT_CHARS = 32


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageDelta:
    """Requests and tokens to add to one group (or, read back, one group's stored totals)."""

    day: date
    key_id: str | None
    owner_id: str | None
    model: str
    dialect: str
    requests: int = 1
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def group(self) -> tuple[date, str | None, str | None, str, str]:
        return (self.day, self.key_id, self.owner_id, self.model, self.dialect)

    @property
    def group_id(self) -> str:
        # \x00 never appears in an id, a model or a dialect; "-" marks a NULL apart from "".
        parts = [self.day.isoformat(), *("-" if v is None else f"={v}" for v in self.group[1:])]
        return hashlib.sha256("\x00".join(parts).encode()).hexdigest()

    def plus(self, other: UsageDelta) -> UsageDelta:
        return replace(
            self,
            requests=self.requests + other.requests,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )


def merge(deltas: Iterable[UsageDelta]) -> list[UsageDelta]:
    """One delta per group (counters summed), in first-seen order."""
    merged: dict[tuple[Any, ...], UsageDelta] = {}
    for delta in deltas:
        seen = merged.get(delta.group)
        merged[delta.group] = delta if seen is None else seen.plus(delta)
    return list(merged.values())


@dataclass(slots=True)
class GatewayCount:
    """Requests and tokens of one group of a summary (a day, a key, a user, a model…)."""

    key: str | None
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, row: UsageDelta) -> None:
        self.requests += row.requests
        self.input_tokens += row.input_tokens
        self.output_tokens += row.output_tokens


@dataclass(frozen=True, slots=True)
class GatewayUsageSummary:
    """Gateway usage of a window: totals, every day (zeros included), and the groups."""

    since: date
    until: date
    totals: GatewayCount
    days: list[GatewayCount]
    keys: list[GatewayCount]
    """``key`` is the key id (None: requests made without a key)."""
    users: list[GatewayCount]
    models: list[GatewayCount]
    dialects: list[GatewayCount]


def summarize_gateway(
    rows: Iterable[UsageDelta], *, since: date, until: date
) -> GatewayUsageSummary:
    """Fold stored groups into a summary; rows outside ``since..until`` are ignored. Groups are
    ordered by total tokens, then requests, then key."""
    days = {since + timedelta(n): GatewayCount(key=(since + timedelta(n)).isoformat())
            for n in range((until - since).days + 1)}  # fmt: skip
    totals = GatewayCount(key="total")
    groups: tuple[dict[str | None, GatewayCount], ...] = ({}, {}, {}, {})
    for row in rows:
        day = days.get(row.day)
        if day is None:
            continue
        day.add(row)
        totals.add(row)
        by = (row.key_id, row.owner_id, row.model, row.dialect)
        for counts, key in zip(groups, by, strict=True):
            counts.setdefault(key, GatewayCount(key=key)).add(row)

    def ranked(counts: dict[str | None, GatewayCount]) -> list[GatewayCount]:
        return sorted(counts.values(), key=lambda c: (-c.total_tokens, -c.requests, c.key or ""))

    keys, users, models, dialects = (ranked(counts) for counts in groups)
    return GatewayUsageSummary(
        since=since,
        until=until,
        totals=totals,
        days=[days[d] for d in sorted(days)],
        keys=keys,
        users=users,
        models=models,
        dialects=dialects,
    )


class GatewayUsageStore:
    """The ``gateway_usage`` table. Safe to share between tasks."""

    def __init__(self, transactions: Transactions, *, dialect: str) -> None:
        self._transactions = transactions
        self._dialect = dialect

    async def add(self, deltas: Sequence[UsageDelta]) -> None:
        """Add every delta to its group's row (created at zero when missing)."""
        merged = merge(deltas)
        if not merged:
            return
        now = utc_now()
        values = [
            {
                "id": d.group_id,
                "day": d.day,
                "key_id": d.key_id,
                "owner_id": d.owner_id,
                "model": d.model[:MODEL_CHARS],
                "dialect": d.dialect[:DIALECT_CHARS],
                "requests": d.requests,
                "input_tokens": d.input_tokens,
                "output_tokens": d.output_tokens,
                "updated_at": now,
            }
            for d in merged
        ]
        # One lock order for every writer: two batches that share groups, upserted in
        # different orders, deadlock on PostgreSQL.
        values.sort(key=lambda row: str(row["id"]))
        insert = postgresql.insert if self._dialect == "postgresql" else sqlite.insert
        statement = insert(GatewayUsageRow).values(values)
        added = statement.excluded
        statement = statement.on_conflict_do_update(
            index_elements=[GatewayUsageRow.id],
            set_={
                "requests": GatewayUsageRow.requests + added.requests,
                "input_tokens": GatewayUsageRow.input_tokens + added.input_tokens,
                "output_tokens": GatewayUsageRow.output_tokens + added.output_tokens,
                "updated_at": added.updated_at,
            },
        )
        async with self._transactions.write() as db:
            await db.execute(statement)

    async def tokens_on(self, day: date, key_id: str) -> int:
        """The tokens (input + output) ``key_id`` used on the UTC ``day``, every node's."""
        query = select(
            func.coalesce(func.sum(GatewayUsageRow.input_tokens + GatewayUsageRow.output_tokens), 0)
        ).where(GatewayUsageRow.day == day, GatewayUsageRow.key_id == key_id)
        async with self._transactions.read() as db:
            return int(await db.scalar(query) or 0)

    async def rows(
        self, *, since: date, until: date, owner_id: str | None = None
    ) -> list[UsageDelta]:
        """The stored groups of the UTC days ``since..until`` (of ``owner_id`` when given)."""
        query = select(GatewayUsageRow).where(
            GatewayUsageRow.day >= since, GatewayUsageRow.day <= until
        )
        if owner_id is not None:
            query = query.where(GatewayUsageRow.owner_id == owner_id)
        async with self._transactions.read() as db:
            found = (await db.scalars(query)).all()
            return [_delta(row) for row in found]

    async def summary(
        self, *, since: date, until: date, owner_id: str | None = None
    ) -> GatewayUsageSummary:
        rows = await self.rows(since=since, until=until, owner_id=owner_id)
        return summarize_gateway(rows, since=since, until=until)


def _delta(row: GatewayUsageRow) -> UsageDelta:
    return UsageDelta(
        day=row.day,
        key_id=row.key_id,
        owner_id=row.owner_id,
        model=row.model,
        dialect=row.dialect,
        requests=row.requests,
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
    )
