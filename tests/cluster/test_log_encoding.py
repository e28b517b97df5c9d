"""The chunk log's compact encoding: every batch and terminal decodes to what was written, from
any cursor, on a reader that never saw the turn; writes stay fenced.

Pure round trips (``encode_batch``/``encode_end`` -> ``decode_entry``), then the same through a
real Redis (``RedisChunkLog`` and its ``dl1`` function).
"""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from chunks.sequences import random_sequence
from drupe.chunks.accumulate import accumulate
from drupe.chunks.types import Chunk
from drupe.cluster.chunk_log import FencedOut, RedisChunkLog, anchors_key
from drupe.cluster.coalesce import Coalescer
from drupe.cluster.lease import RedisLease
from drupe.cluster.log_encoding import (
    LogEntry,
    UnknownExecution,
    decode_entry,
    encode_batch,
    encode_end,
    feed_items,
    names_of,
    run_part,
)

NAMES = {
    1: "anthropic:claude-sonnet-4-5",
    2: "openai:gpt-5?reasoning=high",
    3: "0f3a9c1be2d47a55",
    4: "t:1,2",  # a part id with the separators in it
    5: "t",
}
PARTS = {name: number for number, name in NAMES.items()}

UNICODE = ["é", "🌍", "中文", "a:b,c", "\n", "", 'say "hi"\\', "\x00", ":", ","]


def _round_trip(chunks: list[Chunk], seqs: list[int] | None, number: int = 1) -> LogEntry:
    payload = encode_batch(number, chunks, seqs, PARTS)
    return decode_entry(b"1-0", {b"p": payload}, NAMES)


def _same(decoded: tuple[Chunk, ...], chunks: list[Chunk]) -> None:
    assert list(decoded) == chunks
    # Key order too: the SSE frames a follower sends are these dicts serialized.
    assert [orjson.dumps(c) for c in decoded] == [orjson.dumps(c) for c in chunks]


@pytest.mark.parametrize(
    ("kind", "ident", "text"),
    [
        ("text-delta", "id", "delta"),
        ("reasoning-delta", "id", "delta"),
        ("tool-input-delta", "toolCallId", "inputTextDelta"),
    ],
)
@pytest.mark.parametrize("part", ["0f3a9c1be2d47a55", "t:1,2"])
@pytest.mark.parametrize("delta", ["hello world", *UNICODE])
def test_a_merged_delta_is_its_raw_text_and_decodes_to_the_same_chunk(
    kind: str, ident: str, text: str, part: str, delta: str
) -> None:
    chunk: Chunk = {"type": kind, ident: part, text: delta}
    payload = encode_batch(2, [chunk], [41], PARTS)
    tag = {"text-delta": b"d", "reasoning-delta": b"r", "tool-input-delta": b"i"}[kind]
    assert payload == tag + f"2,41,{PARTS[part]}:".encode() + delta.encode()
    entry = decode_entry("1700000000000-3", {"p": payload}, NAMES)
    assert entry.cursor == "1700000000000-3" and entry.execution_id == NAMES[2]
    assert entry.seqs == (41,) and entry.terminal is None
    _same(entry.chunks, [chunk])


@pytest.mark.parametrize(
    ("chunk", "parts"),
    [
        ({"type": "text-delta", "id": "t", "delta": "x"}, {}),  # an unnumbered part
        ({"type": "text-delta", "id": "t", "delta": "x", "providerMetadata": {"p": 1}}, PARTS),
        ({"type": "text-delta", "delta": "x", "id": "t"}, PARTS),  # another key order
        ({"type": "text-delta", "id": 7, "delta": "x"}, PARTS),
        ({"type": "text-start", "id": "t"}, PARTS),
    ],
)
def test_any_other_single_chunk_is_written_as_json_and_decodes_the_same(
    chunk: Chunk, parts: dict[str, int]
) -> None:
    payload = encode_batch(1, [chunk], [5], parts)
    assert payload.startswith(b"j1,5:")
    entry = decode_entry("1-0", {"p": payload}, NAMES)
    assert entry.seqs == (5,)
    _same(entry.chunks, [chunk])


def test_a_mixed_batch_keeps_every_chunk_and_seq_in_order() -> None:
    chunks: list[Chunk] = [
        {"type": "reasoning-delta", "id": "r", "delta": "think 🌍"},
        {"type": "reasoning-end", "id": "r"},
        {"type": "text-start", "id": "t"},
        {"type": "text-delta", "id": "t", "delta": "a:b,c\n"},
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": "search"},
        {"type": "finish"},
    ]
    entry = _round_trip(chunks, [3, 4, 5, 9, 10, 11])
    _same(entry.chunks, chunks)
    assert entry.seqs == (3, 4, 5, 9, 10, 11)
    no_seqs = _round_trip(chunks, None)  # a writer without seqs
    assert no_seqs.seqs == () and list(no_seqs.chunks) == chunks
    single = _round_trip([chunks[3]], None)
    assert single.seqs == () and list(single.chunks) == [chunks[3]]


@given(st.randoms(use_true_random=False), st.integers(0, 50))
@settings(max_examples=200, deadline=None)
def test_every_coalesced_batch_of_any_stream_round_trips(rng: random.Random, number: int) -> None:
    chunks, seed = random_sequence(rng)
    coalescer = Coalescer(window=0.025)
    names = {number: "model"} if number else {}
    parts: dict[str, int] = {}
    decoded: list[Chunk] = []

    def check(batch: list[Chunk] | None) -> None:
        if batch:
            seqs = coalescer.batch_seqs
            part = run_part(batch, seqs)
            if part is not None and part not in parts:
                parts[part] = 100 + len(parts)
                names[parts[part]] = part
            payload = encode_batch(number, batch, seqs, parts)
            entry = decode_entry("1-1", {"p": payload}, names)
            assert list(entry.chunks) == batch and list(entry.seqs) == seqs
            assert entry.execution_id == ("model" if number else "")
            decoded.extend(entry.chunks)

    for i, chunk in enumerate(chunks):
        if coalescer.due is not None and i * 0.01 >= coalescer.due:
            check(coalescer.flush())
        check(coalescer.push(chunk, i * 0.01, i))
    check(coalescer.flush())
    assert accumulate(decoded, seed=seed) == accumulate(chunks, seed=seed)


@pytest.mark.parametrize(
    ("status", "done", "error", "reason", "retried_as"),
    [
        ("success", True, None, None, None),
        ("paused", False, None, "approval 🌍", None),
        ("error", True, {"message": "the node a:b, was lost", "code": 503}, None, None),
        ("error", False, {"name": "NodeLost"}, None, ("1700000000000:2", "model:a/b")),
    ],
)
def test_terminals_round_trip(
    status: str,
    done: bool,
    error: dict[str, Any] | None,
    reason: str | None,
    retried_as: tuple[str, str] | None,
) -> None:
    for number, execution in ((1, NAMES[1]), (0, "")):
        payload = encode_end(
            number, status, done=done, error=error, reason=reason, retried_as=retried_as
        )
        entry = decode_entry(b"5-0", {b"p": payload}, NAMES)
        assert entry == LogEntry(
            "5-0",
            execution,
            terminal=status,
            done=done,
            error=error,
            reason=reason,
            retried_as=retried_as,
        )


def test_an_unknown_execution_number_is_reported_and_the_plain_form_still_decodes() -> None:
    payload = encode_batch(9, [{"type": "finish"}], [1])
    with pytest.raises(UnknownExecution):
        decode_entry("1-0", {"p": payload}, NAMES)
    # The turn lists' entries (and any plain entry) are plain fields.
    entry = decode_entry(b"2-0", {b"e": b"1700000000000:4", b"n": b"node-a"})
    assert entry.execution_id == "1700000000000:4" and entry.chunks == ()
    assert entry.terminal is None and entry.done is False
    plain = decode_entry("3-0", {"e": "m", "c": orjson.dumps([{"type": "finish"}]), "s": b"[7]"})
    assert plain.chunks == ({"type": "finish"},) and plain.seqs == (7,)


def test_a_plain_terminal_decodes_every_field_and_no_execution_is_the_turn() -> None:
    fields = {
        b"t": b"error",
        b"d": b"1",
        b"x": orjson.dumps({"message": "lost"}),
        b"r": "why 🌍".encode(),
        b"n": b"1700000000000:2/model:a/b",
    }
    entry = decode_entry(b"4-1", fields)
    assert entry == LogEntry(
        "4-1",
        "",
        terminal="error",
        done=True,
        error={"message": "lost"},
        reason="why 🌍",
        retried_as=("1700000000000:2", "model:a/b"),
    )
    bare = decode_entry("4-2", {"t": "success", "e": "m"})
    assert (bare.done, bare.reason, bare.retried_as, bare.error) == (False, None, None, None)


def test_an_end_is_the_conversation_s_end_unless_told_otherwise() -> None:
    entry = decode_entry(b"6-0", {b"p": encode_end(1, "success")}, NAMES)
    assert entry.done is True and entry.retried_as is None


def test_a_part_number_zero_is_never_read_as_the_turn() -> None:
    # 0 names the turn-wide terminal's execution (""), never a part: a delta naming part 0
    # with no such number registered is an unknown number, as any other.
    with pytest.raises(UnknownExecution):
        decode_entry(b"7-0", {b"p": b"d1,5,0:text"}, NAMES)
    assert decode_entry(b"7-1", {b"p": b"d1,5,0:text"}, {**NAMES, 0: "p0"}).chunks == (
        {"type": "text-delta", "id": "p0", "delta": "text"},
    )


def test_only_hash_number_fields_are_names() -> None:
    raw = {b"#3": b"model:a", "#12": "part-1", "~feed": "1", "x12": "anchor", "#": "z", "#1a": "y"}
    raw |= {"exec-1": "row-1"}  # an execution's row (its anchor) lives in the same hash
    assert names_of(raw) == {3: "model:a", 12: "part-1"}


def _item(*strings: bytes) -> bytes:
    return b"".join(b"%d:%b" % (len(s), s) for s in strings)


def test_a_feed_entry_splits_into_its_items_in_order() -> None:
    payloads = [b"d1,5,2:a:b,c", "中文 🌍".encode(), b"", b"12:34"]
    packed = b"".join(
        _item(f"drupe:log:c{i}:t".encode(), f"{i + 1}-0".encode(), p)
        for i, p in enumerate(payloads)
    )
    assert feed_items(packed) == [
        (f"drupe:log:c{i}:t", f"{i + 1}-0", p) for i, p in enumerate(payloads)
    ]
    assert feed_items(b"") == []
    whole = _item(b"k", b"1-0", b"p")
    with pytest.raises(ValueError, match="runs past its end at byte 8"):
        feed_items(whole[:-1])
    with pytest.raises(ValueError, match="ends inside an item"):
        feed_items(whole + b"3:abc")
    for broken in (b"x:" + whole, b"-1:" + whole):
        with pytest.raises(ValueError):
            feed_items(broken)


def test_a_text_reply_decodes_as_the_bytes_would() -> None:
    # A client with decode_responses gives str fields: the same entry.
    payload = encode_batch(1, [{"type": "text-delta", "id": "t", "delta": "中文 a:b"}], [9], PARTS)
    assert decode_entry("8-0", {"p": payload.decode()}, NAMES) == decode_entry(
        b"8-0", {b"p": payload}, NAMES
    )


# --- on a real Redis -----------------------------------------------------------------------------


def _answer(rng: random.Random, part: str, words: int) -> list[Chunk]:
    chunks: list[Chunk] = [{"type": "start"}, {"type": "text-start", "id": part}]
    chunks += [
        {"type": "text-delta", "id": part, "delta": rng.choice([" alpha", " 中文", " 🌍", ":,"])}
        for _ in range(words)
    ]
    return [*chunks, {"type": "text-end", "id": part}, {"type": "finish"}]


async def _write(
    log: RedisChunkLog,
    key: str,
    execution: str,
    chunks: list[Chunk],
    fence: tuple[str, str] | None = None,
) -> list[str]:
    coalescer = Coalescer(window=0.025)
    cursors = []
    for seq, chunk in enumerate(chunks, 1):
        batch = coalescer.push(chunk, seq * 0.005, seq)
        if batch is not None:
            cursors.append(
                await log.append(key, execution, batch, coalescer.batch_seqs, fence=fence)
            )
    rest = coalescer.flush()
    if rest:
        cursors.append(await log.append(key, execution, rest, coalescer.batch_seqs, fence=fence))
    return cursors


async def test_a_fresh_reader_resumes_exactly_from_every_cursor_of_a_two_execution_turn(
    redis: Redis, prefix: str
) -> None:
    rng = random.Random(11)
    writer = RedisChunkLog(redis, prefix=prefix)
    key = writer.key("conv", "1700000000000:1")
    first, second = _answer(rng, "a1", 60), _answer(rng, "b2", 40)
    await _write(writer, key, "model-a", first[:30])
    await _write(writer, key, "model-b", second)  # interleaved executions
    await _write(writer, key, "model-a", first[30:])
    await writer.end(key, "model-b", "success", done=False)
    await writer.end(key, "model-a", "error", error={"message": "x"})
    await writer.end(key, "", "error", error={"message": "node lost"})

    raw = await redis.xrange(key)
    assert all(set(fields) == {b"p"} for _, fields in raw)
    assert sum(fields[b"p"].startswith(b"d") for _, fields in raw) > len(raw) / 2
    names = await redis.hgetall(anchors_key(key))
    assert names == {b"#1": b"model-a", b"#2": b"a1", b"#3": b"model-b", b"#4": b"b2"}

    everything = await RedisChunkLog(redis, prefix=prefix).read(key)
    assert len(everything) == len(raw)

    def fold(entries: list[LogEntry], execution: str) -> list[Chunk]:
        return [c for e in entries if e.execution_id == execution for c in e.chunks]

    assert accumulate(fold(everything, "model-a")) == accumulate(first)
    assert accumulate(fold(everything, "model-b")) == accumulate(second)
    assert [(e.execution_id, e.terminal) for e in everything[-3:]] == [
        ("model-b", "success"),
        ("model-a", "error"),
        ("", "error"),
    ]
    for i, entry in enumerate(everything):
        fresh = RedisChunkLog(redis, prefix=prefix)  # a node that never read this turn
        assert await fresh.read(key, entry.cursor) == everything[i + 1 :]
    assert await RedisChunkLog(redis, prefix=prefix).tail(key, 4) == everything[-4:]


async def test_writers_that_never_met_share_one_numbering(redis: Redis, prefix: str) -> None:
    one, two = RedisChunkLog(redis, prefix=prefix), RedisChunkLog(redis, prefix=prefix)
    key = one.key("conv", "t")
    delta: Chunk = {"type": "text-delta", "id": "t", "delta": "x"}
    await one.append(key, "model-a", [delta], [1])
    await two.append(key, "model-b", [delta], [2])  # wants number 1 too: it gets 2
    await two.end(key, "model-a", "error")  # a takeover ends an execution the other numbered
    entries = await RedisChunkLog(redis, prefix=prefix).read(key)
    assert [(e.execution_id, e.seqs, e.terminal) for e in entries] == [
        ("model-a", (1,), None),
        ("model-b", (2,), None),
        ("model-a", (), "error"),
    ]


async def test_a_writer_whose_lease_changed_writes_nothing(redis: Redis, prefix: str) -> None:
    lease = RedisLease(redis, prefix=prefix)
    log = RedisChunkLog(redis, prefix=prefix)
    key = log.key("conv", "t")
    fence = await lease.acquire("conv", "node-a")
    assert fence is not None
    guard = (lease.lease_key("conv"), fence.value)
    delta: Chunk = {"type": "text-delta", "id": "t", "delta": "mine"}
    await log.append(key, "m", [delta], [1], fence=guard)
    # Same node, another token (the lease was lost and taken again): refused.
    await redis.set(lease.lease_key("conv"), f"node-a|{fence.token + 1}")
    with pytest.raises(FencedOut):
        await log.append(key, "m", [delta], [2], fence=guard)
    # A token that only ends like ours: refused.
    await redis.set(lease.lease_key("conv"), f"node-a|9{fence.token}")
    with pytest.raises(FencedOut):
        await log.end(key, "m", "success", fence=guard)
    await redis.delete(lease.lease_key("conv"))
    with pytest.raises(FencedOut):
        await log.append(key, "other", [delta], [3], fence=guard)  # a first write too
    assert await redis.xlen(key) == 1
    # Numbering a string is not fenced (it never renumbers a known one): harmless.
    assert (await redis.hgetall(anchors_key(key)))[b"#1"] == b"m"
    await redis.set(lease.lease_key("conv"), fence.value)
    await log.append(key, "m", [delta], [4], fence=guard)
    assert [e.seqs for e in await log.read(key)] == [(1,), (4,)]


async def test_a_lost_map_is_registered_again_and_a_reader_never_crashes_on_it(
    redis: Redis, prefix: str
) -> None:
    log = RedisChunkLog(redis, prefix=prefix)
    key = log.key("conv", "t")
    delta: Chunk = {"type": "text-delta", "id": "t", "delta": "x"}
    await log.append(key, "m", [delta], [1])
    await redis.delete(anchors_key(key))  # as if Redis lost it
    reader = RedisChunkLog(redis, prefix=prefix)
    (entry,) = await reader.read(key)
    # Visible, not a crash: the execution and the part show as their numbers.
    assert entry.execution_id == "#1" and entry.chunks == ({**delta, "id": "#2"},)
    log.forget()  # what a failed read or write does
    await log.append(key, "m", [delta], [2])
    assert await redis.hgetall(anchors_key(key)) == {b"#1": b"m", b"#2": b"t"}  # same numbers
    entries = await RedisChunkLog(redis, prefix=prefix).read(key)
    assert [(e.execution_id, e.chunks) for e in entries] == [("m", (delta,))] * 2


async def test_maxlen_rides_on_every_nth_append_only(redis: Redis, prefix: str) -> None:
    log = RedisChunkLog(redis, prefix=prefix, maxlen=5, trim_every=8)
    key = log.key("conv", "t")
    node_size = (await redis.config_get("stream-node-max-entries"))["stream-node-max-entries"]
    await redis.config_set("stream-node-max-entries", 4)
    try:
        for i in range(41):
            await log.append(key, "m", [{"type": "text-delta", "id": "t", "delta": str(i)}], [i])
        # The 41st append (index 40) trimmed: at most maxlen plus a partly filled node remain.
        assert 5 <= await redis.xlen(key) <= 5 + 4
        for i in range(41, 48):
            await log.append(key, "m", [{"type": "text-delta", "id": "t", "delta": str(i)}], [i])
        assert await redis.xlen(key) > 5 + 4  # untrimmed between two trims
    finally:
        await redis.config_set("stream-node-max-entries", node_size)
