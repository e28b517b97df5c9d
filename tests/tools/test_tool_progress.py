"""``coalesced_progress``: at most one report per interval, the latest kept, a trailing one sent."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from drupe.tools.progress import coalesced_progress

INTERVAL = 0.3


async def _until(reports: list[Any], expected: list[Any]) -> None:
    with anyio.fail_after(5):
        while reports != expected:  # noqa: ASYNC110 (the reporter is a plain callback)
            await anyio.sleep(0.005)


async def test_updates_within_an_interval_are_coalesced_to_the_latest_and_sent_after_it() -> None:
    reports: list[Any] = []
    async with coalesced_progress(reports.append, INTERVAL) as update:
        update(1)
        await _until(reports, [1])  # the first at once
        started = anyio.current_time()
        update(2)
        update(3)  # supersedes 2
        await anyio.sleep(INTERVAL / 3)
        assert reports == [1]  # nothing more within the interval
        await _until(reports, [1, 3])  # trailing: sent though nothing followed
        assert anyio.current_time() - started >= INTERVAL * 0.9
        update(4)  # pending when the block is left: dropped
    await anyio.sleep(INTERVAL * 1.5)
    assert reports == [1, 3]


async def test_interval_zero_reports_every_update_at_once() -> None:
    reports: list[Any] = []
    async with coalesced_progress(reports.append, 0) as update:
        for n in range(5):
            update(n)
            assert reports == list(range(n + 1))


async def test_an_error_in_the_block_comes_out_bare() -> None:
    with pytest.raises(KeyError):
        async with coalesced_progress(lambda _: None, INTERVAL):
            raise KeyError("x")
