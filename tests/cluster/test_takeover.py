"""Takeover and fencing across two real runtimes (one PostgreSQL database, one Redis prefix).

The owner's lease is deleted while it answers: exactly what a successor sees when the owner was
paused (or cut off) past the TTL. The successor's sweep takes the conversation over; the old
owner, still running, must then write nothing: not its rows, not the chunk log.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest

from drupe.cluster.takeover import NODE_LOST
from tests.cluster.nodes import Node, cluster_nodes, lose_lease, sse_events, text_of

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

SLOW = "scripted:lorem?words=400&rate=40"


def chat_body(conversation: str, text: str, models: list[str]) -> dict[str, object]:
    return {
        "id": conversation,
        "trigger": "submit-message",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}],
        "models": models,
    }


def answer_turn(body: list[bytes]) -> str:
    ids = [i for i, _ in sse_events(b"".join(body)) if i is not None]
    return ids[0].rsplit("/", 1)[0]


@pytest.fixture
async def nodes(tmp_path: Path, prefix: str) -> AsyncIterator[tuple[Node, Node]]:
    # A long TTL: A renews (and so learns of its loss) only when a test says so
    # (``renew_all``). A node that notices the loss of its lease BEFORE its successor's first
    # row write may still end its own row (paused): the rows' fence only rises with that write.
    async with cluster_nodes(tmp_path, prefix, lease_ttl=30.0) as (a, b):
        yield a, b


async def test_a_successor_takes_over_a_lost_owner_and_the_old_owner_writes_nothing(
    nodes: tuple[Node, Node],
) -> None:
    a, b = nodes
    cluster_a, cluster_b = a.takeover, b.takeover
    owner_body: list[bytes] = []
    follower_body: list[bytes] = []
    speaking, owner_done, follower_done = anyio.Event(), anyio.Event(), anyio.Event()

    async def submit(http: httpx.AsyncClient) -> None:
        async with http.stream("POST", "/api/chat", json=chat_body("t1", "go", [SLOW])) as r:
            assert r.status_code == 200
            async for chunk in r.aiter_bytes():
                owner_body.append(chunk)
                if b"text-delta" in chunk:
                    speaking.set()
        owner_done.set()

    async def follow(http: httpx.AsyncClient) -> None:
        async with http.stream("GET", "/api/chat/t1/stream") as r:
            assert r.status_code == 200
            async for chunk in r.aiter_bytes():
                follower_body.append(chunk)
        follower_done.set()

    async with (
        httpx.AsyncClient(base_url=a.url, timeout=60) as on_a,
        httpx.AsyncClient(base_url=b.url, timeout=60) as on_b,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(submit, on_a)
        with anyio.fail_after(20):
            await speaking.wait()
            tg.start_soon(follow, on_b)
            # Wait until the partial answer reached its row (a checkpoint), as the owner would
            # have it stored when it stalls.
            while True:
                rows = await a.runtime.db.messages.list_for_conversation("t1")
                answer = [r for r in rows if r.role == "assistant"][-1]
                if any(p.get("text") for p in answer.parts):
                    break
                await anyio.sleep(0.05)
        fence_a = cluster_a.ownership.fence_for("t1")
        assert fence_a is not None
        # The owner stalls past its TTL: its lease is gone (what Redis does on expiry), and B,
        # whose sweep found the orphan, takes it over (what the sweep does once A's heartbeat
        # is gone too; tests/cluster/test_sweep.py covers that decision).
        node_a = a.cluster
        await lose_lease(a, "t1")
        assert await cluster_b.take_over("t1", node_a.log.key("t1", answer_turn(owner_body)))
        row = await b.runtime.db.messages.get(answer.id)
        assert row is not None and row.status == "error"
        errors = [p for p in row.parts if p["type"] == "data-error"]
        assert len(errors) == 1 and NODE_LOST in str(errors[0])
        kept = "".join(p.get("text", "") for p in row.parts if p["type"] == "text")
        assert kept  # the checkpointed text is kept
        # Subscribers on every node end with the takeover's error.
        with anyio.fail_after(10):
            await owner_done.wait()
            await follower_done.wait()
        for body in (owner_body, follower_body):
            events = sse_events(b"".join(body))
            assert events[-1][1] == "[DONE]"
            assert events[-2][1]["type"] == "error"  # type: ignore[index]
            assert "lost" in events[-2][1]["errorText"]  # type: ignore[index]
        # Everything the subscribers saw is kept (rebuilt from the chunk log, which is ahead of
        # the last checkpoint; a checkpoint the old owner wrote just before the takeover may
        # even be a few words ahead of the log).
        for body in (follower_body, owner_body):
            seen = text_of(sse_events(b"".join(body)))
            assert seen and kept.startswith(seen)
        # The old owner learns it lost the lease (its next renewal), stops, and writes nothing.
        await cluster_a.ownership.renew_all()
        with anyio.fail_after(10):
            await a.runtime.manager.wait_settled("t1")
        tg.cancel_scope.cancel()
    after = await b.runtime.db.messages.get(answer.id)
    assert after is not None
    assert (after.status, after.parts) == (row.status, row.parts)
    assert cluster_a.ownership.lost >= 1


async def test_a_steer_queued_on_an_owner_that_is_lost_is_answered_with_a_visible_error(
    nodes: tuple[Node, Node],
) -> None:
    a, b = nodes
    cluster_b = b.takeover
    node_a = a.cluster
    owner_body: list[bytes] = []
    speaking = anyio.Event()

    async def submit(http: httpx.AsyncClient) -> None:
        async with http.stream("POST", "/api/chat", json=chat_body("t2", "go", [SLOW])) as r:
            async for chunk in r.aiter_bytes():
                owner_body.append(chunk)
                if b"text-delta" in chunk:
                    speaking.set()

    async with (
        httpx.AsyncClient(base_url=a.url, timeout=60) as on_a,
        httpx.AsyncClient(base_url=b.url, timeout=60) as on_b,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(submit, on_a)
        with anyio.fail_after(20):
            await speaking.wait()
        steer_body: list[bytes] = []
        steer_sent, steer_done = anyio.Event(), anyio.Event()

        async def steer() -> None:
            body = chat_body("t2", "and also this", ["scripted:echo"])
            body["messages"][0]["id"] = "u2"  # type: ignore[index]
            async with on_b.stream("POST", "/api/chat", json=body) as r:
                assert r.status_code == 200
                steer_sent.set()
                async for chunk in r.aiter_bytes():
                    steer_body.append(chunk)
            steer_done.set()

        tg.start_soon(steer)
        with anyio.fail_after(20):
            await steer_sent.wait()
        # The owner is lost with the steer queued in its memory.
        await lose_lease(a, "t2")
        assert await cluster_b.take_over("t2", node_a.log.key("t2", answer_turn(owner_body)))
        with anyio.fail_after(20):
            await steer_done.wait()
        tg.cancel_scope.cancel()
    events = sse_events(b"".join(steer_body))
    assert events[-1][1] == "[DONE]"
    error = events[-2][1]
    assert isinstance(error, dict) and error["type"] == "error"
    assert "not answered" in error["errorText"] and "lost" in error["errorText"]
    rows = await b.runtime.db.messages.list_for_conversation("t2")
    assert "and also this" in str([r.parts for r in rows if r.role == "user"])  # stored
    assert all(r.status != "pending" for r in rows)
