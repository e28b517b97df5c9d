"""Cluster-wide status: what publishing every status change through Redis costs.

Node A's ``ClusterStatus`` writes N status changes (over 1,000 conversations, each one turn
newer than the last) in batches of 256, waiting for each batch to be in Redis (``flush``); node
B's ``ClusterStatus`` follows them on the channel. Measured: changes per second until B has
received every one (and until A has written them), and the bytes Redis received per change
(``INFO stats: total_net_input_bytes``) from a private ``redis-server`` that this bench starts
on a free loopback port.

The baseline, in the same run and process: the same changes as one plain ``HSET`` +
``PUBLISH`` per change, pipelined in the same batches (no ordering rule, no sequence, no
bound), followed by two plain subscribers that decode each message (A's and B's: every node
subscribes): the least a shared status could cost.

    .venv/bin/python bench/cluster_status.py --quick
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio
import orjson
from bench._common import emit
from bench.cluster_log import _free_port, _wait_for
from redis.asyncio import Redis
from redis.asyncio.client import PubSub

from drupe.cluster.node import ClusterNode
from drupe.cluster.status import ClusterStatus
from drupe.settings import ClusterSettings
from drupe.streaming.contracts import StatusRecord

BATCH = 256
CONVERSATIONS = 1_000
STATUSES = ("pending", "streaming", "done")


def _changes(n: int) -> list[tuple[str, StatusRecord]]:
    return [
        (f"conv-{i % CONVERSATIONS:04}", StatusRecord(STATUSES[i % 3], f"{1000 + i}:1"))
        for i in range(n)
    ]


async def _input_bytes(redis: Redis) -> int:
    return int((await redis.info("stats"))["total_net_input_bytes"])


async def _baseline(redis: Redis, changes: list[tuple[str, StatusRecord]]) -> dict[str, float]:
    """Plain HSET + PUBLISH, followed by two plain subscribers (the writing node's and the
    other node's, as every node subscribes) that decode every message."""
    subscribers = [redis.pubsub(), redis.pubsub()]
    for pubsub in subscribers:
        await pubsub.subscribe("base:status-events")
        while (await pubsub.get_message(timeout=None)) is None:
            pass  # the subscribe confirmation

    async def follow(pubsub: PubSub) -> None:
        received = 0
        async for message in pubsub.listen():
            if message["type"] == "message":
                orjson.loads(message["data"])
                received += 1
                if received == len(changes):
                    return

    before = await _input_bytes(redis)
    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for pubsub in subscribers:
            tg.start_soon(follow, pubsub)
        for start in range(0, len(changes), BATCH):
            async with redis.pipeline(transaction=False) as pipe:
                for cid, record in changes[start : start + BATCH]:
                    value = orjson.dumps(
                        {
                            "conversationId": cid,
                            "status": record.status,
                            "turnId": record.turn_id,
                            "node": "a",
                            "lastCompletedAt": None,
                            "at": time.time(),
                        }
                    )
                    pipe.hset("base:status", cid, value)
                    pipe.publish("base:status-events", value)
                await pipe.execute()
        written = time.perf_counter() - started
    followed = time.perf_counter() - started
    sent = await _input_bytes(redis) - before
    for pubsub in subscribers:
        await pubsub.aclose()  # type: ignore[no-untyped-call]
    return {"written_s": written, "followed_s": followed, "bytes": sent}


async def _cluster(
    port: int, redis: Redis, changes: list[tuple[str, StatusRecord]]
) -> dict[str, float]:
    def settings(node_id: str) -> ClusterSettings:
        return ClusterSettings(
            redis_url=f"redis://127.0.0.1:{port}/0", node_id=node_id, key_prefix="bench"
        )

    received = 0
    all_in = anyio.Event()

    def count(conversation_id: str, record: StatusRecord) -> None:
        nonlocal received
        received += 1
        if received == len(changes):
            all_in.set()

    async with (
        ClusterNode(settings("a")) as node_a,
        ClusterNode(settings("b")) as node_b,
        ClusterStatus(node_a) as a,
        ClusterStatus(node_b) as b,
    ):
        b.add_observer(count)
        before = await _input_bytes(redis)
        started = time.perf_counter()
        for start in range(0, len(changes), BATCH):
            for cid, record in changes[start : start + BATCH]:
                a.observe(cid, record)
            await a.flush()
        written = time.perf_counter() - started
        with anyio.fail_after(60):
            await all_in.wait()
        followed = time.perf_counter() - started
        sent = await _input_bytes(redis) - before
    return {"written_s": written, "followed_s": followed, "bytes": sent}


async def _main(port: int, n: int) -> dict[str, object]:
    redis = Redis(host="127.0.0.1", port=port)
    changes = _changes(n)
    base = await _baseline(redis, changes)
    run = await _cluster(port, redis, changes)
    await redis.aclose()
    return {
        "bench": "cluster_status",
        "changes": n,
        "baseline_changes_per_s": round(n / base["followed_s"]),
        "changes_per_s": round(n / run["followed_s"]),
        "ratio": round(base["followed_s"] / run["followed_s"], 2),
        "written_per_s": round(n / run["written_s"]),
        "baseline_written_per_s": round(n / base["written_s"]),
        "baseline_bytes_per_change": round(base["bytes"] / n, 1),
        "bytes_per_change": round(run["bytes"] / n, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="5,000 changes instead of 50,000")
    parser.add_argument("--changes", type=int, default=None)
    args = parser.parse_args()
    n = args.changes or (5_000 if args.quick else 50_000)
    server = shutil.which("redis-server")
    if server is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        argv = [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", tmp]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        try:
            _wait_for(port)
            figures = anyio.run(_main, port, n)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    print(
        f"cluster status, {n} changes written and followed by another node: "
        f"{figures['changes_per_s']}/s (plain HSET+PUBLISH and a plain subscriber: "
        f"{figures['baseline_changes_per_s']}/s, ratio {figures['ratio']}); "
        f"{figures['bytes_per_change']} bytes per change "
        f"(baseline {figures['baseline_bytes_per_change']})"
    )
    emit(figures)


if __name__ == "__main__":
    main()
