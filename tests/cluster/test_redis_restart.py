"""Redis restarted (without its data) in the middle of an answer: the nodes reconnect, the
answer completes, every subscriber gets its end, and nothing is left pending.

A private ``redis-server`` on its own port (``tests/private_redis.py``), so the shared one of
the other tests is untouched.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx
import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from drupe.agent.models.script import Pause, Text
from drupe.agent.models.script_profiles import lorem, register_script
from drupe.cluster.chunk_log import RedisChunkLog
from drupe.cluster.lease import Fence, RedisLease
from drupe.cluster.log_writer import LogWriter, live_key
from drupe.cluster.ownership import LeaseOwnership
from drupe.cluster.status_record import decode_record
from tests.cluster.nodes import Node, cluster_nodes, sse_events, text_of
from tests.private_redis import PrivateRedis

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

PACED = "scripted:lorem?words=150&rate=60"


def _chat(conversation_id: str, model: str) -> dict[str, object]:
    return {
        "id": conversation_id,
        "trigger": "submit-message",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}],
        "models": [model],
    }


@asynccontextmanager
async def _two_nodes(
    tmp_path: Path, name: str, redis: PrivateRedis
) -> AsyncIterator[tuple[Node, Node, httpx.AsyncClient, httpx.AsyncClient]]:
    """Two cluster nodes on the private Redis (lease TTL 3 s), and a client of each."""
    async with (
        cluster_nodes(tmp_path, name, redis=redis.url, lease_ttl=3.0) as (a, b),
        httpx.AsyncClient(base_url=a.url, timeout=60) as on_a,
        httpx.AsyncClient(base_url=b.url, timeout=60) as on_b,
    ):
        yield a, b, on_a, on_b


async def _stored(node: Node, conversation_id: str) -> tuple[str, str]:
    """The conversation's last answer as stored: its status and its text."""
    rows = await node.runtime.db.messages.list_for_conversation(conversation_id)
    answer = rows[-1]
    return answer.status, "".join(p.get("text", "") for p in answer.parts if p["type"] == "text")


def _assert_whole(streams: Sequence[list[bytes]], text: str) -> None:
    """Each SSE stream ended (``[DONE]``) and carried exactly ``text``: from its start,
    nothing twice."""
    for got in streams:
        events = sse_events(b"".join(got))
        assert events[-1][1] == "[DONE]"
        assert text_of(events) == text


async def _submit(
    client: httpx.AsyncClient, body: dict[str, object], into: list[bytes], speaking: anyio.Event
) -> None:
    async with client.stream("POST", "/api/chat", json=body) as r:
        async for chunk in r.aiter_bytes():
            into.append(chunk)
            if b"text-delta" in chunk:
                speaking.set()


async def _follow(
    client: httpx.AsyncClient, conversation_id: str, into: list[bytes], seen: anyio.Event
) -> None:
    async with client.stream("GET", f"/api/chat/{conversation_id}/stream") as r:
        assert r.status_code == 200
        async for chunk in r.aiter_bytes():
            into.append(chunk)
            if b"text-delta" in chunk:
                seen.set()


async def test_an_answer_survives_a_redis_restart_and_ends_for_every_subscriber(
    tmp_path: Path, private_redis: PrivateRedis
) -> None:
    owner: list[bytes] = []
    follower: list[bytes] = []
    speaking, following = anyio.Event(), anyio.Event()
    async with _two_nodes(tmp_path, "restart", private_redis) as (a, _, on_a, on_b):
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_submit, on_a, _chat("r1", PACED), owner, speaking)
                await speaking.wait()
                tg.start_soon(_follow, on_b, "r1", follower, following)
                await following.wait()
                private_redis.stop()
                await anyio.sleep(0.5)  # the answer goes on while Redis is down
                private_redis.start()
        rows = await a.runtime.db.messages.list_for_conversation("r1")
        assert all(r.status != "pending" for r in rows)
        status, stored = await _stored(a, "r1")
        assert status == "success"
        _assert_whole([owner, follower], stored)
        cluster_a = a.takeover
        assert cluster_a.ownership.recovered >= 1  # the vanished lease was taken again
        assert cluster_a.ownership.lost == 0


async def test_a_subscriber_joining_after_redis_lost_its_data_gets_the_whole_answer(
    tmp_path: Path, private_redis: PrivateRedis
) -> None:
    """The owner writes the live turn's log again when Redis comes back without it, so a
    subscriber that attaches afterwards (on any node) replays the answer from its start, and
    one that was already following gets nothing twice."""
    long = "scripted:lorem?words=360&rate=60"  # 6 s: still live when the last one attaches
    owner: list[bytes] = []
    before: list[bytes] = []
    after: list[bytes] = []
    speaking, following = anyio.Event(), anyio.Event()
    async with _two_nodes(tmp_path, "restart2", private_redis) as (a, _, on_a, on_b):
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_submit, on_a, _chat("r2", long), owner, speaking)
                await speaking.wait()
                tg.start_soon(_follow, on_b, "r2", before, following)
                await following.wait()
                private_redis.stop()
                await anyio.sleep(0.5)
                private_redis.start()
                # The owner's next write finds the log gone and writes it again (a counter: no
                # event to wait on).
                while a.cluster.log.restored == 0:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
                await anyio.sleep(0.5)  # the answer goes on after the restore
                tg.start_soon(_follow, on_b, "r2", after, anyio.Event())
        status, stored = await _stored(a, "r2")
        assert status == "success"
        _assert_whole([owner, before, after], stored)
        assert a.cluster.log.restored == 1  # the owner wrote the lost log again, once


register_script("restart-idle", [[Text(lorem(20)), Pause(8.0), Text(" and the rest.")]], rate=60.0)


async def _attach(client: httpx.AsyncClient, conversation_id: str) -> float:
    """Ask for the conversation's live stream until it is there (``204`` until then); the
    seconds it took."""
    began = anyio.current_time()
    while True:
        async with client.stream("GET", f"/api/chat/{conversation_id}/stream") as r:
            if r.status_code == 200:
                return anyio.current_time() - began
            assert r.status_code == 204
        await anyio.sleep(0.1)


async def test_a_turn_writing_nothing_when_redis_lost_its_data_is_restored_at_once(
    tmp_path: Path, private_redis: PrivateRedis
) -> None:
    """The answer waits (a tool running, an approval awaited) when Redis comes back empty:
    no write of the owner finds the loss, but the owner's writer sees Redis restarted and
    restores the turn, so a subscriber on another node finds it before the answer goes on."""
    owner: list[bytes] = []
    speaking = anyio.Event()
    async with _two_nodes(tmp_path, "restart3", private_redis) as (a, _, on_a, on_b):
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_submit, on_a, _chat("r3", "scripted:restart-idle"), owner, speaking)
                await speaking.wait()
                await anyio.sleep(0.8)  # every word before the pause is written
                private_redis.stop()
                await anyio.sleep(0.3)
                private_redis.start()
                took = await _attach(on_b, "r3")
                assert b"the rest" not in b"".join(owner)  # the answer is still waiting
                after: list[bytes] = []
                tg.start_soon(_follow, on_b, "r3", after, anyio.Event())
        assert took < 5.0
        assert await _stored(a, "r3") == ("success", lorem(20) + " and the rest.")
        _assert_whole([owner, after], lorem(20) + " and the rest.")
        assert a.cluster.log.restored == 1


async def test_an_answer_whose_redis_came_back_from_an_older_snapshot_is_written_whole(
    tmp_path: Path, private_redis: PrivateRedis
) -> None:
    """Redis is killed and comes back from a snapshot taken a second earlier (its default
    persistence): the log is there but lacks that second's entries, and the writer's writes
    go on into it. The owner's writer sees Redis restarted, finds the log short and writes it
    whole again, so a subscriber attaching afterwards gets the whole answer, and the ones that
    were following get nothing twice."""
    long = "scripted:lorem?words=420&rate=60"  # 7 s
    owner: list[bytes] = []
    before: list[bytes] = []
    after: list[bytes] = []
    speaking, following = anyio.Event(), anyio.Event()
    async with _two_nodes(tmp_path, "restart4", private_redis) as (a, _, on_a, on_b):
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_submit, on_a, _chat("r4", long), owner, speaking)
                await speaking.wait()
                tg.start_soon(_follow, on_b, "r4", before, following)
                await following.wait()
                await anyio.sleep(0.5)
                admin = Redis.from_url(private_redis.url)
                try:
                    await admin.save()  # the snapshot Redis will come back from
                finally:
                    await admin.aclose()
                await anyio.sleep(1.0)  # a second of entries the snapshot does not hold
                private_redis.stop()  # SIGKILL: no save at shutdown
                private_redis.start()
                while a.cluster.log.restored == 0:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
                await anyio.sleep(0.3)
                tg.start_soon(_follow, on_b, "r4", after, anyio.Event())
        assert await _stored(a, "r4") == ("success", lorem(420))
        _assert_whole([owner, before, after], lorem(420))
        assert a.cluster.log.restored == 1


async def test_statuses_written_after_redis_lost_its_data_reach_every_node(
    tmp_path: Path, private_redis: PrivateRedis
) -> None:
    """Redis's status counter starts again at 0 when it restarts without its data, and a node
    skips records no newer (by ``seq``) than its own: the nodes must still take the new ones,
    and the owner writes its records again (Redis's status hash lost them)."""
    owner: list[bytes] = []
    speaking = anyio.Event()
    async with _two_nodes(tmp_path, "restart5", private_redis) as (a, b, on_a, _):
        on_b = b.membership.status
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_submit, on_a, _chat("r5", "scripted:restart-idle"), owner, speaking)
                await speaking.wait()
                while (seen := on_b.record("r5")) is None or seen.status != "streaming":  # noqa: ASYNC110
                    await anyio.sleep(0.05)
                heard: list[str] = []  # what node B's observers are told of r5
                on_b.add_observer(
                    lambda cid, rec: heard.append(rec.status) if cid == "r5" else None
                )
                assert heard == ["streaming"]  # the view's record, given to a new observer
                private_redis.stop()
                await anyio.sleep(0.3)
                private_redis.start()
                admin = Redis.from_url(private_redis.url)
                try:
                    # the owner writes its live record again, while the answer still waits
                    while not (again := await admin.hget(a.membership.status.keys.hash, "r5")):  # noqa: ASYNC110
                        await anyio.sleep(0.05)
                finally:
                    await admin.aclose()
                assert b"the rest" not in b"".join(owner)
                record = decode_record(again)
                assert (record.status, record.turn_id, record.at) == (
                    seen.status,
                    seen.turn_id,
                    seen.at,  # as it was: the time of the change, not of the restart
                )
                # the first record written after the restart (seq 1) reaches node B too
                while heard.count("streaming") < 2:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
        with anyio.fail_after(10):
            while (seen := on_b.record("r5")) is None or seen.status != "done":  # noqa: ASYNC110
                await anyio.sleep(0.05)
        assert seen.node == a.membership.status.node_id  # the owner's record


async def test_a_lost_turn_takes_its_lease_back_before_it_is_announced_again(
    private_redis: PrivateRedis,
) -> None:
    """Redis restarted empty while two admitted turns wait for their model (nothing written
    yet). The writer's check announces a lost turn again only once its lease is this node's
    again (else another node's sweep would find it live, its lease free and its owner's
    heartbeat gone, and take it over), and a turn whose lease another node took meanwhile is
    not announced again: it is fenced out."""
    redis = Redis.from_url(private_redis.url)
    lease = RedisLease(redis, prefix="rl", ttl=30)
    try:
        async with LeaseOwnership(lease, "node-a", busy=lambda _: True) as ownership:
            writer = LogWriter(
                redis,
                RedisChunkLog(redis, prefix="rl"),
                node_id="node-a",
                fence_of=ownership.fence,
                lease_key=lease.lease_key,
                recover=ownership.recover,
                probe_interval=5.0,  # its first look at start, the next well after the restart
            )
            async with writer:
                for conversation in ("kept", "taken"):
                    await ownership.claim(conversation)
                    await writer.announce(conversation, "t1")
                private_redis.stop()
                private_redis.start()
                with anyio.fail_after(1):
                    while True:  # the client's first command after the restart may fail
                        try:
                            await redis.set(lease.lease_key("taken"), "node-b|7")  # taken over
                            break
                        except RedisConnectionError:
                            await anyio.sleep(0.01)
                assert writer.restores == writer.fenced_out == 0  # not checked yet
                with anyio.fail_after(20):
                    while writer.restores + writer.fenced_out < 2:  # noqa: ASYNC110
                        await anyio.sleep(0.05)
                live = await redis.hgetall(live_key("rl"))
                assert set(live) == {b"kept"}  # the one taken over is not announced again
                held = await lease.holder("kept")
                assert held is not None and held.node_id == "node-a"  # taken back
                assert writer.restores == 1 and writer.fenced_out == 1
                assert await lease.holder("taken") == Fence("taken", "node-b", 7)
    finally:
        await redis.aclose()
