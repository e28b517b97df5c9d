"""``UsageMeter``: write-behind batches of gateway usage over the real store (both databases).

A failed write keeps its deltas for the next one; many requests recorded while a write runs
go out in one batch; nothing recorded before ``aclose`` is lost.
"""

from __future__ import annotations

from datetime import date

import anyio

from drupe.persistence import Database
from drupe.persistence.gateway_usage import UsageDelta
from drupe.persistence.gateway_usage_meter import TokenUsage, UsageMeter
from drupe.persistence.tables import GatewayUsageRow

DAY = date(2026, 5, 4)


def request(key: str, used: TokenUsage) -> UsageDelta:
    return UsageDelta(
        day=DAY,
        key_id=key,
        owner_id="u1",
        model="scripted:echo",
        dialect="messages",
        input_tokens=used.input_tokens,
        output_tokens=used.output_tokens,
    )


async def stored(database: Database) -> dict[str | None, tuple[int, int, int]]:
    rows = await database.gateway_usage.rows(since=DAY, until=DAY)
    return {r.key_id: (r.requests, r.input_tokens, r.output_tokens) for r in rows}


async def test_every_recorded_request_is_stored_once_in_its_group(database: Database) -> None:
    meter = UsageMeter(database.gateway_usage)
    for n in range(50):  # no await in between: one batch, written behind
        meter.record(request("key_a" if n % 2 else "key_b", TokenUsage(n, 1)))
    await meter.flush()
    assert await stored(database) == {
        "key_a": (25, sum(range(1, 50, 2)), 25),
        "key_b": (25, sum(range(0, 50, 2)), 25),
    }
    await meter.aclose()
    meter.record(request("key_a", TokenUsage(1000, 0)))  # after close: refused, not written
    await meter.flush()
    assert (await stored(database))["key_a"][1] == sum(range(1, 50, 2))


async def test_a_failed_write_keeps_its_deltas_for_the_next(database: Database) -> None:
    table = GatewayUsageRow.__table__
    async with database.engine.begin() as conn:
        await conn.run_sync(lambda sync: table.drop(sync))  # type: ignore[attr-defined]
    meter = UsageMeter(database.gateway_usage)
    meter.record(request("key_a", TokenUsage(5, 2)))
    await meter.flush()  # the write fails (no table), is tried once more, fails again
    assert meter.failed_writes == 2
    async with database.engine.begin() as conn:
        await conn.run_sync(lambda sync: table.create(sync))  # type: ignore[attr-defined]
    meter.record(request("key_a", TokenUsage(1, 1)))
    with anyio.fail_after(10):
        await meter.aclose()
    assert await stored(database) == {"key_a": (2, 6, 3)}
