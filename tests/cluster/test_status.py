"""Cluster-wide status on a real Redis: two ``ClusterStatus`` on two ``ClusterNode``s.

Each test uses its own key prefix (``conftest``). Waiting is on observers (events), never on
sleeps; the one wait on time is a heartbeat's own TTL, read from Redis (``PTTL``).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import anyio.lowlevel
import orjson
import pytest
from redis.asyncio import Redis

from drupe.cluster.node import ClusterNode
from drupe.cluster.status import ClusterStatus, StatusKeys
from drupe.settings import ClusterSettings
from drupe.streaming.contracts import StatusRecord
from tests.cluster.conftest import redis_url

pytestmark = pytest.mark.redis


@asynccontextmanager
async def cluster_status(
    prefix: str, node_id: str, *, lease_ttl: float = 10.0, **kwargs: int
) -> AsyncIterator[ClusterStatus]:
    settings = ClusterSettings(
        redis_url=redis_url(), node_id=node_id, key_prefix=prefix, lease_ttl=lease_ttl
    )
    async with ClusterNode(settings) as node, ClusterStatus(node, **kwargs) as status:
        yield status


class Seen:
    """Every record an observer was given, in order; waits for a condition on them."""

    def __init__(self, status: ClusterStatus) -> None:
        self.items: list[tuple[str, str, str]] = []
        self._changed = anyio.Event()
        self.remove = status.add_observer(self)

    def __call__(self, conversation_id: str, record: StatusRecord) -> None:
        self.items.append((conversation_id, record.status, record.turn_id))
        self._changed.set()

    def of(self, conversation_id: str) -> list[str]:
        return [status for cid, status, _ in self.items if cid == conversation_id]

    async def until(self, done: Callable[[], bool]) -> None:
        with anyio.fail_after(30):
            while not done():
                self._changed = anyio.Event()
                await self._changed.wait()


async def stored(redis: Redis, prefix: str) -> dict[str, dict[str, object]]:
    raw = await redis.hgetall(StatusKeys(prefix).hash)
    return {k.decode(): orjson.loads(v) for k, v in raw.items()}


async def test_a_change_on_one_node_reaches_the_other_in_order(redis: Redis, prefix: str) -> None:
    async with cluster_status(prefix, "a") as a, cluster_status(prefix, "b") as b:
        on_a, on_b = Seen(a), Seen(b)
        for status in ("pending", "streaming", "done"):
            a.observe("c1", StatusRecord(status, "1000:1", 5.0 if status == "done" else None))
        await on_b.until(lambda: on_b.of("c1")[-1:] == ["done"])
        assert on_b.of("c1") == ["pending", "streaming", "done"]  # each change, in order
        assert on_a.items == []  # a node's own echoes are not handed back to it
        record = b.record("c1")
        assert record is not None
        assert (record.node, record.turn_id, record.last_completed_at) == ("a", "1000:1", 5.0)
    value = (await stored(redis, prefix))["c1"]
    assert set(value) == {
        "conversationId",
        "status",
        "turnId",
        "node",
        "lastCompletedAt",
        "at",
        "seq",
    }
    assert (value["status"], value["node"], value["turnId"]) == ("done", "a", "1000:1")


async def test_a_late_terminal_of_an_older_turn_never_hides_a_newer_live_turn(
    redis: Redis, prefix: str
) -> None:
    async with cluster_status(prefix, "a") as a, cluster_status(prefix, "b") as b:
        on_a = Seen(a)
        b.observe("c", StatusRecord("streaming", "2000:7"))
        await on_a.until(lambda: on_a.of("c") == ["streaming"])
        a.observe("c", StatusRecord("done", "1000:3"))  # a delayed write of an older turn
        await on_a.until(lambda: len(on_a.of("c")) == 2)
        # A's write was refused and A shows what Redis holds: B's newer live turn.
        assert on_a.items[-1] == ("c", "streaming", "2000:7")
        assert a.writer.refused == 1
        assert (await stored(redis, prefix))["c"]["turnId"] == "2000:7"
        b.observe("c", StatusRecord("done", "2000:7"))  # the same turn always replaces
        await on_a.until(lambda: on_a.of("c")[-1] == "done")
        assert (await stored(redis, prefix))["c"]["status"] == "done"


async def test_an_older_turn_from_the_channel_never_replaces_a_newer_local_one(
    redis: Redis, prefix: str
) -> None:
    """The receiving side applies the same rule as the hash: a record of an older turn that
    reaches B (here published raw, as a delayed node's would be) does not hide B's own newer
    turn, even before B's own write has landed."""
    keys = StatusKeys(prefix)
    async with cluster_status(prefix, "b") as b:
        seen = Seen(b)
        b.observe("c", StatusRecord("streaming", "2000:1"))
        late = {"conversationId": "c", "status": "done", "turnId": "1000:1", "node": "a"}
        sentinel = {**late, "conversationId": "sentinel", "turnId": "1:1"}
        for value in (late, sentinel):
            await redis.publish(keys.channel, orjson.dumps({**value, "at": 1.0, "seq": 10**9}))
        await seen.until(lambda: seen.of("sentinel") == ["done"])
        assert seen.of("c") == []
        record = b.record("c")
        assert record is not None and (record.status, record.turn_id) == ("streaming", "2000:1")


async def test_a_late_echo_of_a_nodes_own_write_never_replaces_its_newer_local_change(
    redis: Redis, prefix: str
) -> None:
    keys = StatusKeys(prefix)
    async with cluster_status(prefix, "a") as a:
        seen = Seen(a)
        a.observe("c", StatusRecord("streaming", "5:1"))
        echo = {"conversationId": "c", "status": "pending", "turnId": "5:1", "node": "a"}
        sentinel = {**echo, "conversationId": "sentinel", "node": "b"}
        for value in (echo, sentinel):
            await redis.publish(keys.channel, orjson.dumps({**value, "at": 1.0, "seq": 10**9}))
        await seen.until(lambda: seen.of("sentinel") == ["pending"])
        record = a.record("c")
        assert record is not None and record.status == "streaming"
        assert seen.of("c") == []


async def test_snapshot_then_follow_leaves_no_gap(redis: Redis, prefix: str) -> None:
    conversations = [f"c{i}" for i in range(20)]
    async with cluster_status(prefix, "a") as a:
        rounds = 60

        async def churn(task_status: anyio.abc.TaskStatus[None]) -> None:
            task_status.started()
            for turn in range(1, rounds + 1):
                for cid in conversations:
                    a.observe(cid, StatusRecord("streaming" if turn % 2 else "done", f"{turn}:1"))
                await anyio.lowlevel.checkpoint()  # the writer and the late boot interleave

        async with anyio.create_task_group() as tg:
            await tg.start(churn)
            async with cluster_status(prefix, "b") as b:  # boots while A is writing
                seen = Seen(b)
                final = f"{rounds}:1"
                await seen.until(
                    lambda: all(
                        (r := b.record(cid)) is not None and r.turn_id == final
                        for cid in conversations
                    )
                )
                truth = await stored(redis, prefix)
                for cid in conversations:
                    record = b.record(cid)
                    assert record is not None
                    assert (record.status, record.seq) == (truth[cid]["status"], truth[cid]["seq"])
                # No step back: each conversation's records reached B in turn order.
                for cid in conversations:
                    turns = [int(t.split(":")[0]) for c, _, t in seen.items if c == cid]
                    assert turns == sorted(turns)


async def test_the_hash_keeps_at_most_the_bound_of_terminal_records_and_every_live_one(
    redis: Redis, prefix: str
) -> None:
    async with cluster_status(prefix, "a", max_terminal=5) as a, cluster_status(prefix, "b") as b:
        seen = Seen(b)
        a.observe("live-1", StatusRecord("streaming", "1:1"))
        for i in range(20):
            a.observe(f"t{i:02}", StatusRecord("done", f"{i + 2}:1"))
        a.observe("live-2", StatusRecord("pending", "30:1"))
        await seen.until(lambda: seen.of("live-2") == ["pending"])
        held = await stored(redis, prefix)
        assert set(held) == {"live-1", "live-2", "t15", "t16", "t17", "t18", "t19"}
        assert await redis.zcard(StatusKeys(prefix).ended) == 5
        a.observe("live-1", StatusRecord("done", "1:1"))  # it ends: now the oldest terminal goes
        await seen.until(lambda: seen.of("live-1")[-1:] == ["done"])
        held = await stored(redis, prefix)
        assert "t15" not in held and {"live-1", "live-2", "t16"} <= set(held)
        assert len(held) == 6


async def test_a_full_queue_coalesces_per_conversation_and_keeps_the_latest(
    redis: Redis, prefix: str
) -> None:
    async with (
        cluster_status(prefix, "a", queue_size=2) as a,
        cluster_status(prefix, "b") as b,
    ):
        seen = Seen(b)
        latest: dict[str, str] = {}
        for turn in range(1, 51):  # synchronous burst: the writer cannot run in between
            for cid in ("x", "y", "z"):
                status = ("pending", "streaming", "done")[turn % 3]
                a.observe(cid, StatusRecord(status, f"{turn}:1"))
                latest[cid] = status
        assert a.writer.coalesced > 0 and a.writer.pending > 0
        await seen.until(lambda: a.writer.pending == 0 and all(seen.of(c) for c in latest))
        await seen.until(lambda: all(seen.of(c)[-1] == s for c, s in latest.items()))
        held = await stored(redis, prefix)
        assert {cid: value["turnId"] for cid, value in held.items()} == dict.fromkeys(
            latest, "50:1"
        )
        assert a.writer.written < 150  # coalesced, not written one by one
        for cid in latest:
            turns = [int(t.split(":")[0]) for c, _, t in seen.items if c == cid]
            assert turns == sorted(turns)


async def test_a_late_node_sees_the_records_written_before_it_started(
    redis: Redis, prefix: str
) -> None:
    async with cluster_status(prefix, "a") as a:
        a.observe("early", StatusRecord("streaming", "5:1"))
        async with cluster_status(prefix, "probe") as probe:
            seen = Seen(probe)
            await seen.until(lambda: seen.of("early") == ["streaming"])
        async with cluster_status(prefix, "b") as b:
            replayed: list[tuple[str, str]] = []
            b.add_observer(lambda cid, record: replayed.append((cid, record.status)))
            assert ("early", "streaming") in replayed  # given at once from the snapshot


async def test_a_change_made_just_after_the_snapshot_is_read_arrives_on_the_channel(
    redis: Redis, prefix: str
) -> None:
    """Subscribe, then read the hash: a change between the two is in both (shown once), and a
    change right after the read is on the channel. Reading first would lose the latter."""
    async with cluster_status(prefix, "a") as a:
        a.observe("before", StatusRecord("streaming", "1:1"))
        await a.flush()

        class Late(ClusterStatus):
            async def _load_snapshot(self, *, forward: bool) -> None:
                a.observe("between", StatusRecord("pending", "2:1"))
                await a.flush()
                await super()._load_snapshot(forward=forward)
                a.observe("after", StatusRecord("pending", "3:1"))
                await a.flush()  # published before this node reads its first message

        settings = ClusterSettings(redis_url=redis_url(), node_id="b", key_prefix=prefix)
        async with ClusterNode(settings) as node, Late(node) as b:
            seen = Seen(b)
            await seen.until(lambda: seen.of("after") == ["pending"])
            assert {cid: r.status for cid, r in b.records().items()} == {
                "before": "streaming",
                "between": "pending",
                "after": "pending",
            }
            assert seen.of("between") == ["pending"]  # once, from the snapshot's replay


_DYING_NODE = textwrap.dedent(
    """
    import sys, anyio
    from drupe.cluster.node import ClusterNode
    from drupe.cluster.status import ClusterStatus
    from drupe.settings import ClusterSettings
    from drupe.streaming.contracts import StatusRecord

    async def main() -> None:
        url, prefix = sys.argv[1], sys.argv[2]
        settings = ClusterSettings(
            redis_url=url, node_id="doomed", key_prefix=prefix, lease_ttl=1.0
        )
        async with ClusterNode(settings) as node, ClusterStatus(node) as status:
            status.observe("orphan", StatusRecord("streaming", "77:1"))
            await status.flush()
            print("ready", flush=True)
            await anyio.sleep_forever()

    anyio.run(main)
    """
)


async def test_a_killed_node_is_reported_dead_once_its_heartbeat_expires(
    redis: Redis, prefix: str
) -> None:
    async with cluster_status(prefix, "alive") as alive:
        seen = Seen(alive)
        process = await anyio.open_process(
            [sys.executable, "-c", _DYING_NODE, redis_url(), prefix],
            stdout=subprocess.PIPE,
            stderr=None,
        )
        try:
            assert process.stdout is not None
            line = b""
            with anyio.fail_after(30):
                while not line.endswith(b"\n"):
                    line += await process.stdout.receive()
            assert line.strip() == b"ready"
            await seen.until(lambda: seen.of("orphan") == ["streaming"])
            assert await alive.dead_nodes() == set()
            assert await alive.orphans() == {}
        finally:
            process.kill()  # SIGKILL: no goodbye, the heartbeat just stops being renewed
            await process.wait()
            await process.aclose()
        key = StatusKeys(prefix).heartbeat("doomed")
        remaining_ms = await redis.pttl(key)
        assert 0 < remaining_ms <= 1000
        await anyio.sleep(remaining_ms / 1000 + 0.05)  # the heartbeat's own deadline
        assert await alive.dead_nodes() == {"doomed"}
        orphans = await alive.orphans()
        assert set(orphans) == {"orphan"} and orphans["orphan"].status == "streaming"
        # The record stays live until a takeover settles it; the takeover's terminal is shown.
        alive.settle("orphan", "77:1", "error")
        await seen.until(lambda: seen.of("orphan")[-1] == "error")
        assert await alive.orphans() == {}
    assert (await stored(redis, prefix))["orphan"]["status"] == "error"  # written by leaving


async def test_a_node_that_leaves_is_not_dead_and_a_live_one_keeps_its_heartbeat(
    redis: Redis, prefix: str
) -> None:
    keys = StatusKeys(prefix)
    async with cluster_status(prefix, "stays", lease_ttl=0.6) as stays:
        async with cluster_status(prefix, "leaves"):
            assert await redis.exists(keys.heartbeat("leaves"))
        assert not await redis.exists(keys.heartbeat("leaves"))
        assert await stays.dead_nodes() == set()
        await anyio.sleep(1.2)  # two TTLs: only renewals (every 0.2 s) keep the key
        assert await redis.exists(keys.heartbeat("stays"))
        assert await redis.zrange(keys.nodes, 0, -1) == [b"stays"]


async def test_changes_made_while_leaving_are_written_before_the_node_goes(
    redis: Redis, prefix: str
) -> None:
    async with cluster_status(prefix, "a") as a:
        for i in range(30):
            a.observe(f"c{i}", StatusRecord("aborted", "9:1"))  # a shutdown's aborts
    held = await stored(redis, prefix)
    assert len(held) == 30 and {v["status"] for v in held.values()} == {"aborted"}


async def test_the_script_writes_each_record_as_json_whatever_its_ids(
    redis: Redis, prefix: str
) -> None:
    """The status script builds the record's JSON from its fields: ids with quotes,
    backslashes, slashes, control characters and any Unicode come back as they were."""
    ids = ["plain", 'quo"te', "back\\slash", "sl/ash", "ünï 中文 🙂", "tab\tnew\nline"]
    before = time.time()
    async with cluster_status(prefix, "n1") as status:
        for i, cid in enumerate(ids):
            completed = None if i % 2 else 1_700_000_000.25
            status.observe(cid, StatusRecord("streaming", f"{i}:1", completed))
        status.observe("done-one", StatusRecord("done", "9:1", 1e22))
        await status.flush()
    got = await stored(redis, prefix)
    assert set(got) == {*ids, "done-one"}
    for i, cid in enumerate(ids):
        record = got[cid]
        assert record.pop("at") >= before and record.pop("seq") >= 1
        assert record == {
            "conversationId": cid,
            "status": "streaming",
            "turnId": f"{i}:1",
            "node": "n1",
            "lastCompletedAt": None if i % 2 else 1_700_000_000.25,
        }
    assert got["done-one"]["lastCompletedAt"] == 1e22 and got["done-one"]["status"] == "done"
