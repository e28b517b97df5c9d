"""``RedisChunkLog`` and ``NodeReader`` on a real Redis: exact replay and resume, one reader."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import anyio
import pytest
from redis.asyncio import Redis

from drupe.chunks.accumulate import accumulate
from drupe.chunks.types import Chunk
from drupe.cluster.chunk_log import RedisChunkLog
from drupe.cluster.coalesce import Coalescer
from drupe.cluster.log_encoding import LogEntry
from drupe.cluster.reader import NodeReader, cursor_key, read_window


def _answer(words: int, rng: random.Random) -> list[Chunk]:
    chunks: list[Chunk] = [{"type": "start", "messageId": "m1"}, {"type": "text-start", "id": "t"}]
    chunks += [
        {"type": "text-delta", "id": "t", "delta": rng.choice([" alpha", " be", " gam", "!"])}
        for _ in range(words)
    ]
    chunks += [{"type": "text-end", "id": "t"}, {"type": "finish"}]
    return chunks


async def _write(log: RedisChunkLog, key: str, chunks: list[Chunk]) -> list[str]:
    coalescer = Coalescer(window=0.025)
    cursors = []
    for i, chunk in enumerate(chunks):
        batch = coalescer.push(chunk, i * 0.004)
        if batch is not None:
            cursors.append(await log.append(key, "e1", batch))
    rest = coalescer.flush()
    if rest:
        cursors.append(await log.append(key, "e1", rest))
    return cursors


def _fold(entries: list[LogEntry]) -> list[Chunk]:
    return [chunk for entry in entries for chunk in entry.chunks]


async def test_a_turn_log_replays_and_resumes_exactly_from_every_cursor(
    redis: Redis, prefix: str
) -> None:
    chunks = _answer(200, random.Random(7))
    log = RedisChunkLog(redis, prefix=prefix, ttl=60)
    key = log.key("conv", "turn-1")
    cursors = await _write(log, key, chunks)
    assert len(cursors) < len(chunks) / 3  # deltas were coalesced
    end = await log.end(key, "e1", "success")

    everything = await log.read(key)
    assert everything[-1].terminal == "success" and everything[-1].cursor == end
    assert accumulate(_fold(everything)) == accumulate(chunks)
    for i, cursor in enumerate(cursors):
        seen = _fold(everything[: i + 1])
        rest = await log.read(key, cursor)
        assert accumulate(seen + _fold(rest)) == accumulate(chunks)
        assert [e.cursor for e in rest] == [e.cursor for e in everything[i + 1 :]]
    assert 0 < await redis.ttl(key) <= 60


async def test_the_log_is_bounded_by_maxlen(redis: Redis, prefix: str) -> None:
    log = RedisChunkLog(redis, prefix=prefix, maxlen=10)
    key = log.key("conv", "turn-1")
    for i in range(500):
        await log.append(key, "e1", [{"type": "text-delta", "id": "t", "delta": str(i)}])
    length = await redis.xlen(key)
    assert 10 <= length < 500  # approximate trimming keeps at least maxlen, far fewer than 500


async def test_many_subscribers_on_a_node_share_one_reader_and_each_sees_everything_once(
    redis: Redis, reader_connection: Redis, prefix: str
) -> None:
    chunks = _answer(300, random.Random(3))
    log = RedisChunkLog(redis, prefix=prefix)
    key = log.key("conv", "turn-1")
    received: dict[int, list[LogEntry]] = {i: [] for i in range(50)}
    ended = {"count": 0}
    all_ended = anyio.Event()

    def collect(i: int) -> Callable[[LogEntry], None]:
        def deliver(entry: LogEntry) -> None:
            received[i].append(entry)
            if entry.terminal is not None:
                ended["count"] += 1
                if ended["count"] == len(received):
                    all_ended.set()

        return deliver

    async with NodeReader(redis, reader_connection, log) as reader:
        first_half = await _write(log, key, chunks[:150])
        for i in range(25):  # early subscribers: from the start
            await reader.watch(key, "0", collect(i))
        for i in range(25, 50):  # late subscribers resume after a cursor they already had
            cursor = first_half[i % len(first_half)]
            prefix_entries = [
                e for e in await log.read(key) if cursor_key(e.cursor) <= cursor_key(cursor)
            ]
            received[i].extend(prefix_entries)
            await reader.watch(key, cursor, collect(i))
        reads_before = reader.xread_calls
        coalescer_rest = await _write(log, key, chunks[150:])
        await log.end(key, "e1", "success")
        with anyio.fail_after(10):
            await all_ended.wait()
        reads = reader.xread_calls - reads_before
    assert coalescer_rest
    assert reads <= len(coalescer_rest) + 2  # one read serves all 50 subscribers
    everything = await log.read(key)
    for got in received.values():
        assert [e.cursor for e in got] == [e.cursor for e in everything]
        assert accumulate(_fold(got)) == accumulate(chunks)


async def test_a_new_key_wakes_the_blocked_reader_at_once(
    redis: Redis, reader_connection: Redis, prefix: str
) -> None:
    log = RedisChunkLog(redis, prefix=prefix)
    got: list[LogEntry] = []
    arrived = anyio.Event()

    def deliver(entry: LogEntry) -> None:
        got.append(entry)
        arrived.set()

    async with NodeReader(redis, reader_connection, log) as reader:
        await reader.watch(log.key("conv", "a"), "0", lambda e: None)
        await anyio.wait_all_tasks_blocked()
        assert reader.blocked  # in XREAD BLOCK 2000 on key a alone
        await reader.watch(log.key("conv", "b"), "0", deliver)
        await log.append(log.key("conv", "b"), "e1", [{"type": "start"}])
        with anyio.fail_after(1):  # well below the 2 s block: the new key woke the read
            await arrived.wait()
    assert got[0].chunks == ({"type": "start"},)


async def test_many_live_streams_are_read_in_one_xread_per_window(
    redis: Redis, reader_connection: Redis, prefix: str
) -> None:
    """30 streams, each written 20 times, 3 ms apart: the reader reads all of them together,
    at most once per window (plus the first read and the one that ends the wait), and every
    stream still gets each of its entries once, in order."""
    window = 0.05
    log = RedisChunkLog(redis, prefix=prefix)
    keys = [log.key(f"conv{i}", "turn") for i in range(30)]
    got: dict[str, list[LogEntry]] = {k: [] for k in keys}
    all_in = anyio.Event()

    def collect(key: str) -> Callable[[LogEntry], None]:
        def deliver(entry: LogEntry) -> None:
            got[key].append(entry)
            if all(len(entries) == 20 for entries in got.values()):
                all_in.set()

        return deliver

    async with NodeReader(redis, reader_connection, log, window=window) as reader:
        for key in keys:
            await reader.watch(key, "0", collect(key))
        reads_before = reader.xread_calls
        started = time.monotonic()
        written: dict[str, list[str]] = {k: [] for k in keys}
        for n in range(20):
            for key in keys:
                chunk = {"type": "text-delta", "id": "t", "delta": f"{n} "}
                written[key].append(await log.append(key, "e1", [chunk]))
            await anyio.sleep(0.003)
        with anyio.fail_after(10):
            await all_in.wait()
        elapsed = time.monotonic() - started
        reads = reader.xread_calls - reads_before
    assert reads <= elapsed / window + 3, (reads, elapsed)
    assert reads < 20  # one read per write round would be 20 or more
    for key in keys:
        assert [e.cursor for e in got[key]] == written[key]


def test_the_read_window_grows_with_the_keys_read_up_to_its_bound() -> None:
    # 10 ms with one key (a lone follower's latency), 25 ms from 64 keys on (the stated bound),
    # in between on the straight line, never past the bound.
    assert read_window(1) == pytest.approx(0.010)
    assert read_window(0) == pytest.approx(0.010)
    assert read_window(64) == pytest.approx(0.025)
    assert read_window(10_000) == pytest.approx(0.025)
    assert read_window(32) == pytest.approx(0.010 + 0.015 * 31 / 63)
    assert all(read_window(n) <= read_window(n + 1) for n in range(100))
