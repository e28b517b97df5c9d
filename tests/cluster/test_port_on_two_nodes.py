"""The ``Conversations`` port across two nodes: what an edge on the node that does not own a
conversation sees (``drupe.cluster.cluster_conversations``).

* Deleting a live conversation through the other node stops the answer on its owner (the
  partial is not left pending) and removes the rows on every node.
* A subscriber attaching on the other node the moment a submit is acknowledged (before the
  owner's first chunk reached the log), or at any later moment up to just after the end,
  follows the answer: never a 204, and what it rebuilds equals the stored row and the owner's
  client (also under a CPU hog).
* A command routed to the owner carries its caller, and the owner's own access policy decides
  again (a caller the owner hides the conversation from stops nothing).
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest

from drupe.admission.access import Action
from drupe.admission.principal import Principal
from drupe.cluster.cluster_conversations import ClusterConversations
from drupe.errors import UnknownConversationError
from tests.cluster.nodes import Node, cluster_nodes, sse_events, text_of
from tests.cluster.test_two_nodes import chat_body, stored_answer

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

Pair = tuple[Node, Node, httpx.AsyncClient, httpx.AsyncClient]


@pytest.fixture
async def pair(tmp_path: Path, prefix: str) -> AsyncIterator[Pair]:
    async with (
        cluster_nodes(tmp_path, prefix) as (a, b),
        httpx.AsyncClient(base_url=a.url, timeout=30) as on_a,
        httpx.AsyncClient(base_url=b.url, timeout=30) as on_b,
    ):
        yield a, b, on_a, on_b


async def test_deleting_a_live_conversation_through_the_other_node_stops_it_and_drops_the_rows(
    pair: Pair,
) -> None:
    a, b, on_a, on_b = pair
    speaking = anyio.Event()
    owner_body: list[bytes] = []

    async def submit() -> None:
        body = chat_body("del1", "go", ["scripted:lorem?words=400&rate=40"])
        async with on_a.stream("POST", "/api/chat", json=body) as r:
            assert r.status_code == 200
            async for chunk in r.aiter_bytes():
                owner_body.append(chunk)
                if b"text-delta" in chunk:
                    speaking.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(submit)
        with anyio.fail_after(15):
            await speaking.wait()
        assert a.runtime.manager.is_live("del1")
        response = await on_b.delete("/api/conversations/del1")
        assert response.status_code == 204
        # The delete returned after the owner stopped the answer (not when it next failed).
        assert not a.runtime.manager.is_live("del1")
    # The owner's client saw the answer end; nothing is live anywhere and the rows are gone.
    events = sse_events(b"".join(owner_body))
    assert events[-1][1] == "[DONE]"
    assert not a.runtime.manager.is_live("del1") and not b.runtime.manager.is_live("del1")
    assert (await on_a.get("/api/conversations/del1")).status_code == 404
    assert (await on_b.get("/api/conversations/del1")).status_code == 404
    with pytest.raises(UnknownConversationError):
        await a.runtime.db.messages.list_for_conversation("del1")


async def test_a_subscriber_on_the_other_node_right_after_the_submit_follows_the_answer(
    pair: Pair,
) -> None:
    _a, _b, on_a, on_b = pair
    for attempt in range(6):
        conversation = f"early{attempt}"
        owner_body: list[bytes] = []
        follower_body: list[bytes] = []
        acknowledged = anyio.Event()

        async def submit(
            conversation: str = conversation,
            owner_body: list[bytes] = owner_body,
            acknowledged: anyio.Event = acknowledged,
        ) -> None:
            body = chat_body(conversation, "hi", ["scripted:lorem?words=40&rate=40"])
            async with on_a.stream("POST", "/api/chat", json=body) as r:
                assert r.status_code == 200
                acknowledged.set()  # the response started: the submit is acknowledged
                async for chunk in r.aiter_bytes():
                    owner_body.append(chunk)

        async with anyio.create_task_group() as tg:
            tg.start_soon(submit)
            with anyio.fail_after(15):
                await acknowledged.wait()
            async with on_b.stream("GET", f"/api/chat/{conversation}/stream") as r:
                assert r.status_code == 200, f"attempt {attempt}: {r.status_code}"
                follower_body.extend([c async for c in r.aiter_bytes()])
        owner = sse_events(b"".join(owner_body))
        follower = sse_events(b"".join(follower_body))
        assert follower[-1][1] == "[DONE]"
        row = await stored_answer(on_b, conversation)
        stored = "".join(p.get("text", "") for p in row["parts"] if p["type"] == "text")
        assert row["status"] == "success"
        assert text_of(follower) == text_of(owner) == stored


async def test_attaching_on_the_other_node_at_random_moments_under_load_rebuilds_the_answer(
    pair: Pair,
) -> None:
    """Issue 23.4's stress: B attaches at random moments (right after the submit, inside a
    coalescing window, mid-answer, around the end and the terminal) while a CPU hog runs; what
    B rebuilds equals A's subscriber and the stored row, every time."""
    _a, _b, on_a, on_b = pair
    rng = random.Random(2326)
    answer_s = 40 / 40  # words / rate
    moments = [0.0, 0.005, 0.02, 0.03, *(rng.uniform(0, answer_s) for _ in range(4))]
    moments += [answer_s - 0.05, answer_s, answer_s + 0.05, answer_s + 0.3]
    hog = subprocess.Popen(  # noqa: ASYNC220  # a CPU hog beside the nodes, bounded in time
        [sys.executable, "-c", "import time\nend = time.time() + 60\nwhile time.time() < end: pass"]
    )
    try:
        for attempt, moment in enumerate(moments):
            conversation = f"stress{attempt}"
            owner_body: list[bytes] = []
            follower_body: list[bytes] = []
            started = anyio.Event()

            async def submit(
                conversation: str = conversation,
                owner_body: list[bytes] = owner_body,
                started: anyio.Event = started,
            ) -> None:
                body = chat_body(conversation, "hi", ["scripted:lorem?words=40&rate=40"])
                async with on_a.stream("POST", "/api/chat", json=body) as r:
                    assert r.status_code == 200
                    started.set()
                    async for chunk in r.aiter_bytes():
                        owner_body.append(chunk)

            async with anyio.create_task_group() as tg:
                tg.start_soon(submit)
                with anyio.fail_after(20):
                    await started.wait()
                await anyio.sleep(moment)
                async with on_b.stream("GET", f"/api/chat/{conversation}/stream") as r:
                    assert r.status_code == 200, f"attach at {moment:.3f} s: {r.status_code}"
                    follower_body.extend([c async for c in r.aiter_bytes()])
            owner = sse_events(b"".join(owner_body))
            follower = sse_events(b"".join(follower_body))
            row = await stored_answer(on_b, conversation)
            stored = "".join(p.get("text", "") for p in row["parts"] if p["type"] == "text")
            assert follower[-1][1] == "[DONE]", f"attach at {moment:.3f} s"
            assert text_of(follower) == text_of(owner) == stored, f"attach at {moment:.3f} s"
    finally:
        hog.kill()
        hog.wait()


class _OnlyAlice:
    """A policy that hides every conversation from everyone but alice."""

    async def check(self, caller: Principal, conversation_id: str, action: Action) -> None:
        if caller.user_id != "alice":
            raise UnknownConversationError(conversation_id)

    def owner_for_new(self, caller: Principal) -> str | None:
        return caller.user_id

    def list_filter(self, caller: Principal) -> str | None:
        return None


async def test_a_routed_command_carries_its_caller_and_the_owner_checks_it_again(
    pair: Pair,
) -> None:
    a, b, on_a, _on_b = pair
    speaking = anyio.Event()

    async def submit() -> None:
        body = chat_body("guarded", "go", ["scripted:lorem?words=200&rate=40"])
        async with on_a.stream("POST", "/api/chat", json=body) as r:
            async for chunk in r.aiter_bytes():
                if b"text-delta" in chunk:
                    speaking.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(submit)
        with anyio.fail_after(15):
            await speaking.wait()
        owner = a.runtime.conversations
        assert isinstance(owner, ClusterConversations)
        owner.local.access = _OnlyAlice()  # only the owner node is strict
        mallory = Principal(user_id="mallory", name="mallory")
        with pytest.raises(UnknownConversationError):
            await b.runtime.conversations.stop(mallory, "guarded")
        assert a.runtime.manager.is_live("guarded")  # nothing was stopped
        assert await b.runtime.conversations.stop(
            Principal(user_id="alice", name="alice"), "guarded"
        )
        tg.cancel_scope.cancel()
