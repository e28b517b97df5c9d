"""The feeds: every log write also feeds its entry to its writer's feed, and a node follows fed
turns through one feed per writer instead of one key per turn, on a real Redis.

The expectation is the turns' logs themselves (``XRANGE``): what a watcher gets through a feed
must be exactly the log's entries, with the log's ids as cursors, once each, in order.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import anyio
from redis.asyncio import Redis

from drupe.chunks.accumulate import accumulate
from drupe.chunks.types import Chunk
from drupe.cluster.chunk_log import (
    FEED_MARK,
    FEED_NAMED,
    FEED_TTL,
    Append,
    RedisChunkLog,
    anchors_key,
    feed_key,
)
from drupe.cluster.log_encoding import LogEntry, as_text, feed_items
from drupe.cluster.log_functions import APPEND
from drupe.cluster.log_writer import LogWriter
from drupe.cluster.reader import NodeReader, cursor_key
from drupe.streaming.listeners.base import StreamEvent


def _delta(text: str) -> Chunk:
    return {"type": "text-delta", "id": "t", "delta": text}


async def _mark(redis: Redis, log: RedisChunkLog, key: str) -> None:
    """What a writer of this version does when it announces the turn: it names its feed."""
    await redis.hset(anchors_key(key), FEED_NAMED, log.feed)


async def test_every_write_feeds_its_entry_as_the_log_holds_it(redis: Redis, prefix: str) -> None:
    log = RedisChunkLog(redis, prefix=prefix)
    keys = [log.key(f"c{i}", "t") for i in range(12)]
    await log.append(keys[0], "m", [_delta("one")], [1])
    await log.append_many([Append(k, "m", [_delta(f"x{i}:\n")], [2]) for i, k in enumerate(keys)])
    await log.end(keys[1], "m", "success")

    fed: list[tuple[str, str, bytes]] = []
    assert log.feed.startswith(f"{prefix}:feed:") and log.is_feed(log.feed)
    for _, fields in await redis.xrange(log.feed):
        fed += feed_items(fields[b"f"])
    logged = [
        (key, as_text(entry_id), fields[b"p"])
        for key in keys
        for entry_id, fields in await redis.xrange(key)
    ]
    assert sorted(fed) == sorted(logged)
    assert len(logged) == 1 + len(keys) + 1
    # One feed entry per call (3), not one per write (14).
    assert await redis.xlen(log.feed) == 3
    assert await log.fed(keys[0]) is None  # not announced: no mark, read directly


def test_feed_items_refuses_a_truncated_entry() -> None:
    packed = b"3:abc3:1-06:pay:lo"
    assert feed_items(packed) == [("abc", "1-0", b"pay:lo")]
    for bad in (packed[:-1], b"3:abc3:1-0", b"x:abc"):
        try:
            feed_items(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} was accepted")


async def test_a_node_follows_many_fed_turns_through_the_feeds_and_each_gets_its_log_once(
    redis: Redis, reader_connection: Redis, prefix: str
) -> None:
    """40 fed turns written concurrently, watchers joining at random moments on one node: the
    loop reads the writer's feed alone, and every watcher gets exactly its log after its
    cursor."""
    rng = random.Random(5)
    log = RedisChunkLog(redis, prefix=prefix)
    keys = [log.key(f"c{i}", "t") for i in range(40)]
    for key in keys:
        await _mark(redis, log, key)
    got: dict[int, list[LogEntry]] = {}
    starts: dict[int, str] = {}
    done = anyio.Event()
    watchers: list[tuple[int, str]] = []

    def collect(n: int) -> Callable[[LogEntry], None]:
        def deliver(entry: LogEntry) -> None:
            got[n].append(entry)
            if entry.terminal is not None and all(
                got[i] and got[i][-1].terminal is not None for i in got
            ):
                done.set()

        return deliver

    async with NodeReader(redis, reader_connection, log) as reader:

        async def join(n: int, key: str) -> None:
            got[n] = []
            entries = await log.read(key)
            after = entries[rng.randrange(len(entries))].cursor if entries else "0"
            starts[n] = after
            await reader.watch(key, after, collect(n))

        async with anyio.create_task_group() as group:
            for step in range(30):
                await log.append_many(
                    [Append(k, "m", [_delta(f"{step} ")], [step + 1]) for k in keys]
                )
                if step % 3 == 0:
                    for _ in range(4):
                        n = len(watchers)
                        watchers.append((n, rng.choice(keys)))
                        group.start_soon(join, n, watchers[-1][1])
                await anyio.sleep(0.002)
        for key in keys:
            await log.end(key, "m", "success")
        with anyio.fail_after(10):
            await done.wait()
        read_keys = reader.read_keys
        assert reader.caught_up == 0  # the feeds delivered everything
    assert read_keys == [log.feed]
    assert all(":feed:" in k for k in read_keys)
    for n, key in watchers:
        everything = await log.read(key)
        expected = [e for e in everything if _after(e.cursor, starts[n])]
        assert [e.cursor for e in got[n]] == [e.cursor for e in expected]
        assert got[n] == expected


def _after(cursor: str, start: str) -> bool:
    return start in ("0", "") or cursor_key(cursor) > cursor_key(start)


async def test_a_turn_without_the_mark_is_read_directly(
    redis: Redis, reader_connection: Redis, prefix: str
) -> None:
    log = RedisChunkLog(redis, prefix=prefix)
    key = log.key("old", "t")  # its writer is of an earlier version: no mark
    got: list[LogEntry] = []
    ended = anyio.Event()

    def deliver(entry: LogEntry) -> None:
        got.append(entry)
        if entry.terminal:
            ended.set()

    async with NodeReader(redis, reader_connection, log) as reader:
        await reader.watch(key, "0", deliver)
        assert reader.read_keys == [key]
        await redis.fcall(APPEND, 1, key, "", b"d1,1,0:hi")  # dl1, as that writer calls it
        await log.end(key, "", "success")
        with anyio.fail_after(5):
            await ended.wait()
    assert [e.cursor for e in got] == [e.cursor for e in await log.read(key)]


async def test_a_write_that_did_not_feed_is_caught_up_from_the_log(
    redis: Redis, reader_connection: Redis, prefix: str
) -> None:
    """A fed turn taken over by a node of an earlier version: its terminal is written with
    ``dl1``, which does not feed; the reader's reconcile finds it in the log."""
    log = RedisChunkLog(redis, prefix=prefix)
    key = log.key("conv", "t")
    await _mark(redis, log, key)
    await log.append(key, "m", [_delta("fed")], [1])
    got: list[LogEntry] = []
    ended = anyio.Event()

    def deliver(entry: LogEntry) -> None:
        got.append(entry)
        if entry.terminal:
            ended.set()

    async with NodeReader(redis, reader_connection, log, reconcile_every=0.1) as reader:
        await reader.watch(key, "0", deliver)
        await log.append(key, "m", [_delta(" live")], [2])  # fed: arrives at once
        await redis.fcall(APPEND, 1, key, "", b'e0:{"t":"error","d":1}')  # not fed
        with anyio.fail_after(5):
            await ended.wait()
        assert reader.caught_up == 1
    assert [e.cursor for e in got] == [e.cursor for e in await log.read(key)]
    assert got[-1].terminal == "error" and got[-1].execution_id == ""


async def test_the_writer_marks_its_turns_and_followers_read_them_through_feeds(
    redis: Redis, reader_connection: Redis, prefix: str
) -> None:
    """A real ``LogWriter`` (the owner) and a ``NodeReader`` (another node) on 20 turns."""
    log = RedisChunkLog(redis, prefix=prefix)
    follower_log = RedisChunkLog(redis, prefix=prefix)
    writer = LogWriter(
        redis, log, node_id="node-a", fence_of=lambda _: None, lease_key=str, window=0.005
    )
    conversations = [f"c{i}" for i in range(20)]
    answer: list[Chunk] = [
        {"type": "start"},
        {"type": "text-start", "id": "t"},
        *[_delta(f" w{i}") for i in range(40)],
        {"type": "text-end", "id": "t"},
        {"type": "finish"},
    ]
    got: dict[str, list[LogEntry]] = {c: [] for c in conversations}
    finished: set[str] = set()
    all_finished = anyio.Event()

    def collect(conversation: str) -> Callable[[LogEntry], None]:
        def deliver(entry: LogEntry) -> None:
            got[conversation].append(entry)
            if entry.chunks and entry.chunks[-1] == answer[-1]:
                finished.add(conversation)
                if len(finished) == len(conversations):
                    all_finished.set()

        return deliver

    async with writer, NodeReader(redis, reader_connection, follower_log) as reader:
        for conversation in conversations:
            await writer.announce(conversation, "t")
            assert await follower_log.fed(log.key(conversation, "t"))
            await reader.watch(log.key(conversation, "t"), "0", collect(conversation))
        for seq, chunk in enumerate(answer, 1):
            for conversation in conversations:
                writer.push(
                    StreamEvent(
                        conversation_id=conversation,
                        turn_id="t",
                        execution_id="m",
                        attempt_id=1,
                        anchor_message_id=None,
                        seq=seq,
                        chunk=chunk,
                    )
                )
            await anyio.sleep(0.002)
        with anyio.fail_after(10):
            await all_finished.wait()
        assert reader.read_keys == [log.feed]  # one feed for the writer's 20 turns
    assert 0 < await redis.ttl(log.feed) <= FEED_TTL  # it expires once its writer is gone
    for conversation, entries in got.items():
        logged = await log.read(log.key(conversation, "t"))
        assert [e.cursor for e in entries] == [e.cursor for e in logged]
        assert accumulate([c for e in entries for c in e.chunks]) == accumulate(answer)


class _CountingLog(RedisChunkLog):
    """The real log, counting how often a reader asks whether a turn is fed."""

    asked = 0

    async def fed(self, key: str) -> str | None:
        self.asked += 1
        return await super().fed(key)


async def test_many_watchers_joining_at_once_ask_redis_once_and_all_get_everything(
    redis: Redis, reader_connection: Redis, prefix: str
) -> None:
    log = _CountingLog(redis, prefix=prefix)
    writer = RedisChunkLog(redis, prefix=prefix)  # the owner's (its own lookups not counted)
    key = log.key("conv", "t")
    await _mark(redis, writer, key)
    await writer.append(key, "m", [_delta("before ")], [1])
    got: dict[int, list[LogEntry]] = {i: [] for i in range(80)}
    ended: set[int] = set()
    all_ended = anyio.Event()

    def collect(i: int) -> Callable[[LogEntry], None]:
        def deliver(entry: LogEntry) -> None:
            got[i].append(entry)
            if entry.terminal is not None:
                ended.add(i)
                if len(ended) == len(got):
                    all_ended.set()

        return deliver

    async with NodeReader(redis, reader_connection, log) as reader:
        async with anyio.create_task_group() as group:
            for i in range(80):  # below the client pool's 100 connections: one replay each
                group.start_soon(reader.watch, key, "0", collect(i))
        await writer.append(key, "m", [_delta("after")], [2])
        await writer.end(key, "m", "success")
        with anyio.fail_after(5):
            await all_ended.wait()
    assert log.asked == 1
    everything = [e.cursor for e in await log.read(key)]
    assert all([e.cursor for e in entries] == everything for entries in got.values())


async def test_an_earlier_versions_turn_is_followed_through_its_shard_feed(
    redis: Redis, reader_connection: Redis, prefix: str
) -> None:
    """A writer of an earlier version marks its turns with ``FEED_MARK`` and feeds each to its
    shard's feed (``crc32 % 8``): a reader of this version follows it there."""
    log = RedisChunkLog(redis, prefix=prefix)
    key = log.key("old", "t")
    shard = log.shard_feed_of(key)
    assert shard.startswith(f"{prefix}:feed:") and shard != log.feed
    await redis.hset(anchors_key(key), FEED_MARK, 1)
    assert await log.fed(key) == shard
    got: list[LogEntry] = []
    ended = anyio.Event()

    def deliver(entry: LogEntry) -> None:
        got.append(entry)
        if entry.terminal:
            ended.set()

    async with NodeReader(redis, reader_connection, log, reconcile_every=60) as reader:
        await reader.watch(key, "0", deliver)
        assert reader.read_keys == [shard]
        for payload in (b"d1,1,0:hi", b'e1:{"t":"success","d":1}'):  # dl2, as it calls it
            await redis.fcall("dl2", 3, key, key, shard, "", payload, "", "")
        with anyio.fail_after(5):  # through the feed: the reconcile (60 s) would be too late
            await ended.wait()
    assert [e.cursor for e in got] == [e.cursor for e in await log.read(key)]


async def test_a_write_to_another_writers_turn_feeds_the_feed_the_turn_named(
    redis: Redis, prefix: str
) -> None:
    """A takeover writes the terminal of another node's turn: into the feed that turn's
    announcement named (its followers read that one), not the taking node's own, and that
    feed, maybe gone with its writer, gets a TTL."""
    owner = RedisChunkLog(redis, prefix=prefix)
    taking = RedisChunkLog(redis, prefix=prefix)
    key = owner.key("conv", "t")
    await _mark(redis, owner, key)
    await owner.append(key, "m", [_delta("partial")], [1])
    await redis.persist(owner.feed)
    await taking.end(key, "", "error")
    fed = [i for _, f in await redis.xrange(owner.feed) for i in feed_items(f[b"f"])]
    assert [(k, p[:2]) for k, _, p in fed] == [(key, b"d1"), (key, b"e0")]
    assert not await redis.exists(taking.feed)
    assert 0 < await redis.ttl(owner.feed) <= 60
    assert feed_key(prefix, "w1") == f"{prefix}:feed:w1"
