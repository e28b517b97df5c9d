"""``GatewayUsageStore``: per-group upserts add up exactly, on SQLite and PostgreSQL."""

from __future__ import annotations

import random
from collections import Counter
from datetime import date, timedelta

import anyio

from drupe.persistence import Database
from drupe.persistence.gateway_usage import UsageDelta, summarize_gateway

DAY = date(2026, 3, 1)


def delta(**overrides: object) -> UsageDelta:
    values: dict[str, object] = {
        "day": DAY,
        "key_id": "key_a",
        "owner_id": "u1",
        "model": "scripted:echo",
        "dialect": "chat-completions",
        "requests": 1,
        "input_tokens": 0,
        "output_tokens": 0,
    }
    values.update(overrides)
    return UsageDelta(**values)  # type: ignore[arg-type]


async def test_concurrent_adds_keep_every_count_in_one_row_per_group(database: Database) -> None:
    rng = random.Random(7)
    groups = [
        {"key_id": "key_a", "owner_id": "u1", "model": "scripted:echo"},
        {"key_id": "key_a", "owner_id": "u1", "model": "fake:fake-1"},
        {"key_id": "key_b", "owner_id": "u2", "model": "scripted:echo"},
        {"key_id": None, "owner_id": None, "model": "scripted:echo"},  # keys not required
        {"key_id": None, "owner_id": "local", "model": "scripted:echo", "day": DAY + timedelta(1)},
    ]
    deltas = [
        delta(**groups[rng.randrange(len(groups))], input_tokens=rng.randrange(50),
              output_tokens=rng.randrange(50))
        for _ in range(120)
    ]  # fmt: skip
    expected: Counter[tuple[object, ...]] = Counter()
    for d in deltas:
        for name, value in (("r", 1), ("i", d.input_tokens), ("o", d.output_tokens)):
            expected[(*d.group, name)] += value

    async with anyio.create_task_group() as tg:
        for start in range(0, len(deltas), 10):  # 12 writers, 10 deltas each
            tg.start_soon(database.gateway_usage.add, deltas[start : start + 10])

    rows = await database.gateway_usage.rows(since=DAY, until=DAY + timedelta(1))
    assert len(rows) == len({d.group for d in deltas})  # one row per group, not per request
    got: Counter[tuple[object, ...]] = Counter()
    for row in rows:
        got[(*row.group, "r")] += row.requests
        got[(*row.group, "i")] += row.input_tokens
        got[(*row.group, "o")] += row.output_tokens
    assert got == expected


async def test_window_and_owner_filters(database: Database) -> None:
    await database.gateway_usage.add(
        [
            delta(day=DAY - timedelta(1), input_tokens=5),
            delta(input_tokens=7, output_tokens=3),
            delta(owner_id="u2", key_id="key_b", output_tokens=11),
            delta(day=DAY + timedelta(1), output_tokens=1),
        ]
    )
    summary = await database.gateway_usage.summary(since=DAY, until=DAY)
    assert (summary.totals.requests, summary.totals.input_tokens) == (2, 7)
    assert summary.totals.output_tokens == 14
    assert [(k.key, k.total_tokens) for k in summary.keys] == [("key_b", 11), ("key_a", 10)]
    mine = await database.gateway_usage.summary(since=DAY - timedelta(1), until=DAY, owner_id="u1")
    assert [(d.key, d.requests, d.total_tokens) for d in mine.days] == [
        ((DAY - timedelta(1)).isoformat(), 1, 5),
        (DAY.isoformat(), 1, 10),
    ]
    assert [u.key for u in mine.users] == ["u1"]


def test_summary_lists_every_day_and_ranks_groups() -> None:
    rows = [
        delta(model="m1", input_tokens=1),
        delta(model="m2", input_tokens=9, dialect="messages"),
        delta(model="m2", output_tokens=1, day=DAY + timedelta(2)),
        delta(model="m3", output_tokens=100, day=DAY + timedelta(9)),  # outside the window
    ]
    summary = summarize_gateway(rows, since=DAY, until=DAY + timedelta(2))
    assert [d.requests for d in summary.days] == [2, 0, 1]
    assert [(m.key, m.requests, m.total_tokens) for m in summary.models] == [
        ("m2", 2, 10),
        ("m1", 1, 1),
    ]
    assert [(d.key, d.requests) for d in summary.dialects] == [
        ("messages", 1),
        ("chat-completions", 2),
    ]
