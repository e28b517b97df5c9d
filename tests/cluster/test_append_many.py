"""Many batches in one call (``RedisChunkLog.append_many``, ``FCALL dl2m``) and the node's
``LogWriter`` that sends them, on a real Redis.

The expectation is independent of the batched path: the same batches written one ``append``
at a time (the single-write function ``dl1``), and the answers the chunks fold to.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable

import anyio
import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from drupe.chunks.accumulate import accumulate
from drupe.chunks.types import Chunk
from drupe.cluster.chunk_log import (
    FEED_NAMED,
    Append,
    DataLost,
    FencedOut,
    RedisChunkLog,
    anchors_key,
)
from drupe.cluster.coalesce import Coalescer
from drupe.cluster.lease import Fence, RedisLease
from drupe.cluster.log_encoding import feed_items, msgpack_array
from drupe.cluster.log_functions import REGISTERED_LIBRARY_NAME
from drupe.cluster.log_writer import LogWriter, hdel_if_turn, live_key
from drupe.streaming.listeners.base import StreamEvent, TerminalResult


def _answer(rng: random.Random, part: str, words: int) -> list[Chunk]:
    chunks: list[Chunk] = [{"type": "start"}, {"type": "text-start", "id": part}]
    chunks += [
        {"type": "text-delta", "id": part, "delta": rng.choice([" alpha", " 中文", ":,", "\n"])}
        for _ in range(words)
    ]
    return [*chunks, {"type": "text-end", "id": part}, {"type": "finish"}]


def _batches(chunks: list[Chunk]) -> list[tuple[list[Chunk], list[int]]]:
    """The coalesced batches of ``chunks`` (5 ms apart, 25 ms window) with their seqs."""
    coalescer = Coalescer(window=0.025)
    out: list[tuple[list[Chunk], list[int]]] = []
    for seq, chunk in enumerate(chunks, 1):
        batch = coalescer.push(chunk, seq * 0.005, seq)
        if batch is not None:
            out.append((batch, list(coalescer.batch_seqs)))
    rest = coalescer.flush()
    if rest:
        out.append((rest, list(coalescer.batch_seqs)))
    return out


def _interleaved(
    turns: dict[str, list[tuple[list[Chunk], list[int]]]], execution: str = "model-a"
) -> list[Append]:
    """Every turn's batches, round robin across the turns, each turn's in order."""
    writes: list[Append] = []
    queues = {key: list(batches) for key, batches in turns.items()}
    while any(queues.values()):
        for key, queue in queues.items():
            if queue:
                chunks, seqs = queue.pop(0)
                writes.append(Append(key, execution, chunks, seqs))
    return writes


async def _entries(
    redis: Redis, prefix: str, key: str
) -> list[tuple[str, tuple[Chunk, ...], tuple[int, ...]]]:
    fresh = RedisChunkLog(redis, prefix=prefix)  # a node that never saw the turn
    return [(e.execution_id, e.chunks, e.seqs) for e in await fresh.read(key)]


async def test_many_batches_in_one_call_are_the_entries_one_append_each_writes(
    redis: Redis, prefix: str
) -> None:
    rng = random.Random(7)
    answers = {f"t{i}": _answer(rng, f"p{i}", 30 + 7 * i) for i in range(5)}
    log = RedisChunkLog(redis, prefix=prefix, maxlen=1_000, trim_every=3)
    many = {log.key("conv", turn): _batches(chunks) for turn, chunks in answers.items()}
    one_by_one = {log.key("single", turn): _batches(chunks) for turn, chunks in answers.items()}

    writes = _interleaved(many)
    answers_ = await log.append_many(writes)
    assert len(answers_) == len(writes)
    assert all(isinstance(a, str) for a in answers_)
    ids = [a for a in answers_ if isinstance(a, str)]
    assert [await redis.xlen(key) for key in many] == [len(b) for b in many.values()]
    # One call, one Redis clock: the ids rise in call order, across every log.
    assert ids == sorted(ids, key=lambda i: tuple(int(x) for x in i.split("-")))

    for key, batches in one_by_one.items():
        for chunks, seqs in batches:
            await log.append(key, "model-a", chunks, seqs)
    for turn, chunks in answers.items():
        batched = await _entries(redis, prefix, log.key("conv", turn))
        single = await _entries(redis, prefix, log.key("single", turn))
        assert batched == single
        assert accumulate([c for _, got, _ in batched for c in got]) == accumulate(chunks)


async def test_a_lost_lease_refuses_only_its_own_writes(redis: Redis, prefix: str) -> None:
    lease = RedisLease(redis, prefix=prefix)
    log = RedisChunkLog(redis, prefix=prefix)
    mine, lost = await lease.acquire("a", "node-a"), await lease.acquire("b", "node-a")
    assert mine is not None and lost is not None
    await redis.set(lease.lease_key("b"), f"node-c|{lost.token + 1}")  # taken over since
    delta: Chunk = {"type": "text-delta", "id": "t", "delta": "x"}
    a, b, c = log.key("a", "t"), log.key("b", "t"), log.key("c", "t")
    guard_a = (lease.lease_key("a"), mine.value)
    guard_b = (lease.lease_key("b"), lost.value)
    writes = [
        Append(a, "m", [delta], [1], guard_a),
        Append(b, "m", [delta], [1], guard_b),
        Append(c, "m", [delta], [1]),  # unfenced
        Append(b, "m", [delta], [2], guard_b),
        Append(a, "m", [delta], [2], guard_a),
    ]
    got = await log.append_many(writes)
    assert [type(x) for x in got] == [str, FencedOut, str, FencedOut, str]
    assert await redis.xlen(b) == 0
    assert [s for _, _, s in await _entries(redis, prefix, a)] == [(1,), (2,)]
    assert await redis.xlen(c) == 1


async def test_a_failed_write_stops_its_log_in_that_call_so_a_retry_keeps_the_order(
    redis: Redis, prefix: str
) -> None:
    log = RedisChunkLog(redis, prefix=prefix)
    good, bad = log.key("good", "t"), log.key("bad", "t")
    await redis.set(bad, "not a stream")  # its XADD fails with WRONGTYPE

    def delta(seq: int) -> Append:
        return Append(
            good if seq % 2 else bad,
            "m",
            [{"type": "text-delta", "id": "t", "delta": str(seq)}],
            [seq],
        )

    writes = [delta(seq) for seq in range(1, 9)]  # good: 1 3 5 7, bad: 2 4 6 8
    got = await log.append_many(writes)
    assert [isinstance(x, str) for x in got] == [True, False] * 4
    failed = [x for x in got if not isinstance(x, str)]
    assert all(isinstance(x, ResponseError) for x in failed)
    assert "WRONGTYPE" in str(failed[0])
    assert all("earlier write" in str(x) for x in failed[1:])
    assert [s for _, _, s in await _entries(redis, prefix, good)] == [(1,), (3,), (5,), (7,)]

    await redis.delete(bad)
    retry = [w for w, x in zip(writes, got, strict=True) if not isinstance(x, str)]
    assert all(isinstance(x, str) for x in await log.append_many(retry))
    assert [s for _, _, s in await _entries(redis, prefix, bad)] == [(2,), (4,), (6,), (8,)]


async def test_a_redis_that_lost_the_function_gets_it_again(redis: Redis, prefix: str) -> None:
    log = RedisChunkLog(redis, prefix=prefix)
    key = log.key("conv", "t")
    delta: Chunk = {"type": "text-delta", "id": "t", "delta": "x"}
    await log.append_many([Append(key, "m", [delta], [1])])
    await redis.function_delete(REGISTERED_LIBRARY_NAME)
    with pytest.raises(ResponseError, match=r"(?i)function not found"):
        await redis.fcall("dl3m", 0)
    assert all(isinstance(x, str) for x in await log.append_many([Append(key, "m", [delta], [2])]))
    assert [s for _, _, s in await _entries(redis, prefix, key)] == [(1,), (2,)]


async def _fcall_args(redis: Redis, call: Callable[[], Awaitable[object]]) -> list[str]:
    """The ``FCALL dl3m`` command lines Redis received while ``call`` ran (``MONITOR``)."""
    lines: list[str] = []
    monitor_client = Redis(
        connection_pool=redis.connection_pool.__class__(**redis.connection_pool.connection_kwargs)
    )
    async with monitor_client.monitor() as monitor:
        # MONITOR replies once it is on; then every command Redis runs is reported
        async def collect() -> None:
            async for command in monitor.listen():
                lines.append(command["command"])

        async with anyio.create_task_group() as group:
            group.start_soon(collect)
            await anyio.sleep(0.05)
            await call()
            await redis.ping()
            await anyio.sleep(0.2)
            group.cancel_scope.cancel()
    await monitor_client.aclose()
    return [line for line in lines if line.lower().startswith("fcall dl3m")]


async def test_a_registered_turn_is_written_without_naming_its_keys(
    redis: Redis, prefix: str
) -> None:
    lease = RedisLease(redis, prefix=prefix)
    log = RedisChunkLog(redis, prefix=prefix)
    fence = await lease.acquire("conv-with-a-long-name", "node-a")
    assert fence is not None
    key = log.key("conv-with-a-long-name", "turn-with-a-long-name")
    guard = (lease.lease_key("conv-with-a-long-name"), fence.value)

    def delta(seq: int) -> Append:
        return Append(
            key, "m", [{"type": "text-delta", "id": "t", "delta": f"w{seq}"}], [seq], guard
        )

    first = await _fcall_args(redis, lambda: log.append_many([delta(1)]))
    later = await _fcall_args(redis, lambda: log.append_many([delta(2)]))
    assert len(first) == 1 and len(later) == 1
    assert key in first[0] and guard[0] in first[0]  # registered once, with its keys
    assert "conv-with-a-long-name" not in later[0]  # then named by its number only
    assert [s for _, _, s in await _entries(redis, prefix, key)] == [(1,), (2,)]


async def test_a_registry_redis_lost_is_written_again_and_no_batch_twice(
    redis: Redis, prefix: str
) -> None:
    lease = RedisLease(redis, prefix=prefix)
    log = RedisChunkLog(redis, prefix=prefix)
    fence = await lease.acquire("a", "node-a")
    assert fence is not None
    a, b = log.key("a", "t"), log.key("b", "t")
    guard = (lease.lease_key("a"), fence.value)

    def delta(key: str, seq: int) -> Append:
        fenced = guard if key == a else None
        return Append(
            key, "m", [{"type": "text-delta", "id": "t", "delta": str(seq)}], [seq], fenced
        )

    assert all(isinstance(x, str) for x in await log.append_many([delta(a, 1), delta(b, 1)]))
    await redis.delete(log.registry)  # as a Redis restarted without its data would have it
    got = await log.append_many([delta(a, 2), delta(b, 2), delta(a, 3)])
    assert all(isinstance(x, str) for x in got)
    assert [s for _, _, s in await _entries(redis, prefix, a)] == [(1,), (2,), (3,)]
    assert [s for _, _, s in await _entries(redis, prefix, b)] == [(1,), (2,)]
    assert await redis.hlen(log.registry) == 2

    # the lease re-granted to this node (a new token): the turn is registered again with it
    await redis.delete(lease.lease_key("a"))
    again = await lease.acquire("a", "node-a")
    assert again is not None and again.value != fence.value
    stale = await log.append_many([delta(a, 4)])
    assert isinstance(stale[0], FencedOut)  # the old token no longer holds
    renewed = Append(
        a,
        "m",
        [{"type": "text-delta", "id": "t", "delta": "5"}],
        [5],
        (lease.lease_key("a"), again.value),
    )
    assert isinstance((await log.append_many([renewed]))[0], str)
    assert [s for _, _, s in await _entries(redis, prefix, a)] == [(1,), (2,), (3,), (5,)]

    # a turn's end drops it from the registry with the next call
    await log.end(b, "m", "success")
    await log.append_many([delta(a, 6)])
    assert await redis.hlen(log.registry) == 1


def _event(conversation: str, seq: int, chunk: Chunk) -> StreamEvent:
    return StreamEvent(
        conversation_id=conversation,
        turn_id="t",
        execution_id="model-a",
        attempt_id=1,
        anchor_message_id=f"row-{conversation}",
        seq=seq,
        chunk=chunk,
    )


def _end(conversation: str) -> TerminalResult:
    return TerminalResult(
        status="success",
        conversation_id=conversation,
        turn_id="t",
        execution_id="model-a",
        model_id="model-a",
        attempt_id=1,
        anchor_message_id=f"row-{conversation}",
        final_message=None,
        is_conversation_done=True,
    )


async def test_the_writer_sends_many_turns_batches_together_and_each_log_is_exact(
    redis: Redis, prefix: str
) -> None:
    """40 turns stream at once through one node's writer; a lost lease drops only its turn."""
    rng = random.Random(3)
    lease = RedisLease(redis, prefix=prefix)
    log = RedisChunkLog(redis, prefix=prefix)
    conversations = [f"c{i}" for i in range(40)]
    fences: dict[str, Fence] = {}
    for conversation in conversations:
        fence = await lease.acquire(conversation, "node-a")
        assert fence is not None
        fences[conversation] = fence
    answers = {c: _answer(rng, "p", 25) for c in conversations}
    writer = LogWriter(
        redis,
        log,
        node_id="node-a",
        fence_of=fences.get,
        lease_key=lease.lease_key,
        window=0.005,
    )
    lost = conversations[7]
    async with writer:
        for step in range(len(answers[lost])):
            for conversation in conversations:
                if step < len(answers[conversation]):
                    writer.push(_event(conversation, step + 1, answers[conversation][step]))
            if step == 10:  # another node took this one over mid-answer
                await redis.set(lease.lease_key(lost), f"node-b|{fences[lost].token + 1}")
            await anyio.sleep(0.004)
        async with anyio.create_task_group() as group:
            for conversation in conversations:
                group.start_soon(writer.end, _end(conversation))

    entries = 0
    for conversation in conversations:
        got = await _entries(redis, prefix, log.key(conversation, "t"))
        entries += len(got)
        if conversation == lost:
            continue
        chunks = [c for _, batch, _ in got for c in batch]
        assert accumulate(chunks) == accumulate(answers[conversation])
        seqs = [s for _, _, batch_seqs in got for s in batch_seqs]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert writer.fenced_out >= 1
    text = "".join(
        c.get("delta", "")
        for _, b, _ in await _entries(redis, prefix, log.key(lost, "t"))
        for c in b
    )
    expected = "".join(c.get("delta", "") for c in answers[lost])
    assert len(text) < len(expected) and expected.startswith(text)
    # The batches shared their calls: far fewer calls than entries.
    assert 0 < writer.batch_calls < entries / 3


async def test_a_call_holds_one_batch_per_turn_so_a_fast_turn_streams_while_it_is_written(
    redis: Redis, prefix: str
) -> None:
    """Two turns queue 12 and 6 batches at once (structural chunks are written at once): each
    call takes at most one batch of a turn, so the first batch of the fast turn is in Redis
    before its next is sent, and every log is exact and in order."""
    log = RedisChunkLog(redis, prefix=prefix)
    writer = LogWriter(redis, log, node_id="node-a", fence_of=lambda _: None, lease_key=str)
    steps: dict[str, list[Chunk]] = {
        "fast": [
            {"type": "start-step"} if i % 2 == 0 else {"type": "finish-step"} for i in range(12)
        ],
        "slow": [
            {"type": "start-step"} if i % 2 == 0 else {"type": "finish-step"} for i in range(6)
        ],
    }
    async with writer:
        await writer.announce("fast", "t")
        await writer.announce("slow", "t")
        calls_before = writer.batch_calls
        # All queued before the writer runs: each turn's first chunk (its anchor and first
        # batch), then the rest of the fast turn, then the rest of the slow one.
        for conversation, chunks in steps.items():
            writer.push(_event(conversation, 1, chunks[0]))
        for conversation, chunks in steps.items():
            for seq, chunk in enumerate(chunks[1:], 2):
                writer.push(_event(conversation, seq, chunk))
        async with anyio.create_task_group() as group:
            for conversation in steps:
                group.start_soon(writer.end, _end(conversation))
        calls = writer.batch_calls - calls_before
    for conversation, chunks in steps.items():
        got = await _entries(redis, prefix, log.key(conversation, "t"))
        assert [c for _, batch, _ in got for c in batch] == chunks
        assert [s for _, _, seqs in got for s in seqs] == list(range(1, len(chunks) + 1))
    assert calls == 12  # one per batch of the fast turn; the slow turn's rode along


async def test_a_live_entry_leaves_only_for_its_own_turn_with_or_without_the_script_cached(
    redis: Redis, prefix: str
) -> None:
    live = live_key(prefix)
    await redis.hset(live, "conv", f'{{"key": "{prefix}:log:conv:t2"}}')
    await redis.script_flush()  # as after a Redis restart: the digest alone is not enough
    await hdel_if_turn(redis, live, "conv", f"{prefix}:log:conv:t1")  # an older turn's end
    assert await redis.hexists(live, "conv")
    await hdel_if_turn(redis, live, "conv", f"{prefix}:log:conv:t2")
    assert not await redis.hexists(live, "conv")
    await redis.hset(live, "conv", f'{{"key": "{prefix}:log:conv:t3"}}')
    await hdel_if_turn(redis, live, "conv", f"{prefix}:log:conv:t3")  # now by digest
    assert not await redis.hexists(live, "conv")


async def test_the_calls_messagepack_is_what_redis_cmsgpack_reads_at_every_size(
    redis: Redis,
) -> None:
    ints = [0, 1, 127, 128, 255, 256, 65_535, 65_536, 2**32 - 1, 2**32, 2**53]
    strings = [b"", b"x", b"\x00\xff:," * 8, b"s" * 31, b"s" * 32, b"m" * 255, b"m" * 256]
    strings += [b"l" * 65_535, b"l" * 65_536]
    items: list[int | bytes] = [*ints, *strings]
    many: list[int | bytes] = list(range(70_000))  # an array past 16 and past 65,535 items
    read = """
    local t = cmsgpack.unpack(ARGV[1])
    local out = {}
    for i, v in ipairs(t) do
      if type(v) == 'number' then out[i] = string.format('%.0f', v) else out[i] = '#' .. v end
    end
    return out
    """
    got = await redis.eval(read, 0, msgpack_array(items))
    assert got == [str(i).encode() for i in ints] + [b"#" + s for s in strings]
    count = "return #cmsgpack.unpack(ARGV[1])"
    assert await redis.eval(count, 0, msgpack_array(many)) == 70_000
    assert await redis.eval(count, 0, msgpack_array(many[:16])) == 16
    assert await redis.eval(count, 0, msgpack_array([])) == 0
    with pytest.raises(ValueError, match="negative"):
        msgpack_array([-1])


async def test_a_tracked_turn_redis_lost_is_refused_until_restored_then_whole(
    redis: Redis, prefix: str
) -> None:
    log = RedisChunkLog(redis, prefix=prefix)
    key = log.key("conv", "t")
    log.track(key)

    def batch(seq: int, text: str) -> Append:
        return Append(key, "model-a", [{"type": "text-delta", "id": "p", "delta": text}], [seq])

    start = Append(key, "model-a", [{"type": "start"}, {"type": "text-start", "id": "p"}], [1, 2])
    assert all(isinstance(x, str) for x in await log.append_many([start, batch(3, "a")]))
    assert all(isinstance(x, str) for x in await log.append_many([batch(4, "b")]))
    written = await _entries(redis, prefix, key)
    assert await log.restore(key, None) == 0  # nothing lost: nothing written again

    # Redis comes back without its data: the log, its numbers and the writer's registry
    await redis.delete(key, anchors_key(key), log.registry)
    got = await log.append_many([batch(5, "c")])
    assert isinstance(got[0], DataLost)
    assert await redis.exists(key) == 0  # nothing new landed in the empty log
    assert await log.restore(key, None) == 3
    assert await _entries(redis, prefix, key) == written  # a reader that never saw it
    assert all(isinstance(x, str) for x in await log.append_many([batch(5, "c")]))
    assert [s for _, _, s in await _entries(redis, prefix, key)] == [(1, 2), (3,), (4,), (5,)]

    log.forget_turn(key)  # the turn ended: nothing kept, nothing to restore
    await redis.delete(key, anchors_key(key), log.registry)
    assert await log.restore(key, None) == 0
    assert all(isinstance(x, str) for x in await log.append_many([batch(6, "d")]))


async def test_a_log_an_older_snapshot_left_short_is_found_and_written_whole_again(
    redis: Redis, prefix: str
) -> None:
    """Redis came back from an older snapshot: the log and the registry are there but lack
    the newest entries, so writes go on into a log with a hole that no write finds.
    ``incomplete`` finds it, and ``restore`` replaces it with every entry in order."""
    log = RedisChunkLog(redis, prefix=prefix)
    key, other = log.key("conv", "t"), log.key("conv2", "t")
    for k in (key, other):
        log.track(k)
        await redis.hset(anchors_key(k), FEED_NAMED, log.feed)  # announced

    def batch(k: str, seq: int) -> Append:
        return Append(k, "m", [{"type": "text-delta", "id": "p", "delta": f"w{seq}"}], [seq])

    for seq in (1, 2, 3, 4):
        assert all(isinstance(x, str) for x in await log.append_many([batch(key, seq)]))
    assert isinstance((await log.append_many([batch(other, 1)]))[0], str)
    assert await log.incomplete([key, other]) == []
    assert await log.restore(key, None) == 0  # whole: nothing written again

    # the snapshot was taken after the second entry: the third and fourth are gone
    ids = [entry_id for entry_id, _ in await redis.xrange(key)]
    await redis.xdel(key, *ids[2:])
    assert isinstance((await log.append_many([batch(key, 5)]))[0], str)  # lands after the hole
    assert [s for _, _, s in await _entries(redis, prefix, key)] == [(1,), (2,), (5,)]
    await redis.hdel(anchors_key(other), FEED_NAMED)  # a turn announced after the snapshot
    assert await log.incomplete([key, other]) == [key, other]

    assert await log.restore(key, None) == 5
    assert [s for _, _, s in await _entries(redis, prefix, key)] == [(i,) for i in range(1, 6)]
    assert [c[0]["delta"] for _, c, _ in await _entries(redis, prefix, key)] == [
        f"w{i}" for i in range(1, 6)
    ]
    assert await log.incomplete([key]) == []
    assert isinstance((await log.append_many([batch(key, 6)]))[0], str)
    assert [s for _, _, s in await _entries(redis, prefix, key)] == [(i,) for i in range(1, 7)]

    # a turn kept only from the middle (tracked again after its executions had ended): its
    # short log is never replaced by the tail, which would lose the start
    tail = log.key("conv3", "t")
    await redis.hset(anchors_key(tail), FEED_NAMED, log.feed)
    assert isinstance((await log.append_many([batch(tail, 1)]))[0], str)
    log.track(tail, from_start=False)
    for seq in (2, 3):
        assert isinstance((await log.append_many([batch(tail, seq)]))[0], str)
    ids = [entry_id for entry_id, _ in await redis.xrange(tail)]
    await redis.xdel(tail, *ids[1:])
    assert await log.incomplete([tail]) == [tail]  # but kept from the middle only:
    assert await log.restore(tail, None) == 0
    assert [s for _, _, s in await _entries(redis, prefix, tail)] == [(1,)]


async def test_a_lost_turn_whose_lease_was_taken_again_first_is_still_found_lost(
    redis: Redis, prefix: str
) -> None:
    # Redis came back empty and the node re-took the lease (a new token) before the writer's
    # next write: registering the turn again with the new token must not hide the loss.
    lease = RedisLease(redis, prefix=prefix)
    log = RedisChunkLog(redis, prefix=prefix)
    first = await lease.acquire("conv", "node-a")
    assert first is not None
    key = log.key("conv", "t")
    log.track(key)

    def batch(seq: int, value: str) -> Append:
        chunk: Chunk = {"type": "text-delta", "id": "p", "delta": str(seq)}
        return Append(key, "m", [chunk], [seq], (lease.lease_key("conv"), value))

    for seq in (1, 2):
        assert isinstance((await log.append_many([batch(seq, first.value)]))[0], str)
    await redis.delete(key, anchors_key(key), log.registry, lease.lease_key("conv"))
    again = await lease.acquire("conv", "node-a")
    assert again is not None and again.value != first.value
    got = await log.append_many([batch(3, again.value)])
    assert isinstance(got[0], DataLost) and await redis.exists(key) == 0
    assert await log.restore(key, (lease.lease_key("conv"), again.value)) == 2
    assert isinstance((await log.append_many([batch(3, again.value)]))[0], str)
    assert [s for _, _, s in await _entries(redis, prefix, key)] == [(1,), (2,), (3,)]


async def test_a_turn_whose_numbers_changed_is_not_restored_and_writing_goes_on(
    redis: Redis, prefix: str
) -> None:
    log = RedisChunkLog(redis, prefix=prefix)
    key = log.key("conv", "t")
    log.track(key)
    delta: Chunk = {"type": "text-delta", "id": "p", "delta": "x"}
    assert isinstance((await log.append_many([Append(key, "m", [delta], [1])]))[0], str)
    # The log and registry are gone, and another writer took the execution's number.
    await redis.delete(key, anchors_key(key), log.registry)
    await redis.hset(anchors_key(key), "#1", "another execution")
    assert isinstance((await log.append_many([Append(key, "m", [delta], [2])]))[0], DataLost)
    assert await log.restore(key, None) == 0  # its entries would decode wrong: not written
    assert isinstance((await log.append_many([Append(key, "m", [delta], [2])]))[0], str)
    assert [e for e, _, _ in await _entries(redis, prefix, key)] == ["m"]


async def test_the_functions_earlier_versions_call_append_fence_and_feed_as_before(
    redis: Redis, prefix: str
) -> None:
    """``dl1`` and ``dl2m`` are no longer called by this version, but nodes of earlier versions
    call them during a rolling upgrade (and this version's load replaces their source)."""
    log = RedisChunkLog(redis, prefix=prefix)
    await log.append_many([])  # nothing to write; load the libraries the way a writer does
    await log.append(log.key("warm", "t"), "m", [{"type": "finish"}], [1])
    lease = RedisLease(redis, prefix=prefix)
    held = await lease.acquire("a", "node-a")
    assert held is not None
    token = held.value[held.value.rfind("|") :]
    a, b = log.key("a", "t"), log.key("b", "t")
    feed = log.shard_feed_of(a)

    # dl1: KEYS log, lease; ARGV fence, payload, maxlen, ttl
    first = await redis.fcall("dl1", 2, a, lease.lease_key("a"), token, b"p1", "", 30)
    assert first is not None and 0 < await redis.ttl(a) <= 30
    assert await redis.fcall("dl1", 2, a, lease.lease_key("a"), "|999", b"px", "") is None
    # dl2m: KEYS log_i, lease_i ..., feeds; ARGV n, then fence, payload, maxlen, feed number
    got = await redis.fcall(
        "dl2m", 7, a, lease.lease_key("a"), b, b, a, lease.lease_key("a"), feed, 3,
        token, b"p2", 1000, 1, "", b"q1", "", 1, "|999", b"px", "", 1,
    )  # fmt: skip
    assert [type(x) for x in got] == [bytes, bytes, int] and got[2] == 0
    assert [f[b"p"] for _, f in await redis.xrange(a)] == [b"p1", b"p2"]
    assert [f[b"p"] for _, f in await redis.xrange(b)] == [b"q1"]
    fed = [item for _, f in await redis.xrange(feed) for item in feed_items(f[b"f"])]
    assert (a, got[0].decode(), b"p2") in fed and (b, got[1].decode(), b"q1") in fed
