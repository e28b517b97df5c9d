"""``on_owner_loss = "retry"``: a taken-over turn is answered again, and every subscriber sees it.

Two real runtimes on one PostgreSQL database and one Redis prefix. The owner (A) loses its
lease mid-answer (what a successor sees when A was killed or paused past the TTL); B takes the
conversation over. With ``retry``, B keeps A's partial answer in its row (ended with one
``data-error`` part), answers the same user message again with the same model as a new sibling
row, and every subscriber's ONE response goes on: the partial text, a ``data-retry`` chunk, then
the whole new answer and ``[DONE]``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import anyio
import httpx
import pytest

from drupe.agent.models.scripted import lorem
from drupe.cluster.takeover import MAX_OWNER_LOSS_RETRIES, NODE_LOST, NODE_LOST_RETRIED
from tests.cluster.nodes import Node, cluster_nodes, lose_lease, sse_events

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

WORDS = 150
MODEL = f"scripted:lorem?words={WORDS}&rate=50"


def chat_body(conversation: str) -> dict[str, object]:
    return {
        "id": conversation,
        "trigger": "submit-message",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}],
        "models": [MODEL],
    }


@pytest.fixture
async def nodes(tmp_path: Path, prefix: str) -> AsyncIterator[list[Node]]:
    # A long TTL: A's first renewal (TTL/3) comes after the takeover. A node that notices the
    # loss of its lease BEFORE its successor's first row write may still end its own row
    # (paused): the rows' fence only rises with that write. Here A stands for a dead node.
    async with cluster_nodes(tmp_path, prefix, lease_ttl=30.0, on_owner_loss="retry") as pair:
        yield pair


async def lose_the_owner_mid_answer(
    a: Node,
    b: Node,
    conversation: str,
    bodies: dict[str, list[bytes]],
    before_loss: Callable[[str], Awaitable[None]] | None = None,
) -> tuple[str, str]:
    """Start an answer on A, follow it on B, then delete A's lease and let B take over
    (``before_loss(user message id)`` runs just before). Returns (the lost row's id, the lost
    turn's id)."""
    cluster_b = b.takeover
    node_a = a.cluster
    speaking, following = anyio.Event(), anyio.Event()
    done = {name: anyio.Event() for name in bodies}

    async def submit(http: httpx.AsyncClient) -> None:
        async with http.stream("POST", "/api/chat", json=chat_body(conversation)) as r:
            assert r.status_code == 200
            async for chunk in r.aiter_bytes():
                bodies["owner"].append(chunk)
                if b"text-delta" in chunk:
                    speaking.set()
        done["owner"].set()

    async def follow(http: httpx.AsyncClient) -> None:
        async with http.stream("GET", f"/api/chat/{conversation}/stream") as r:
            assert r.status_code == 200
            async for chunk in r.aiter_bytes():
                bodies["follower"].append(chunk)
                if b"text-delta" in chunk:
                    following.set()
        done["follower"].set()

    async with (
        httpx.AsyncClient(base_url=a.url, timeout=60) as on_a,
        httpx.AsyncClient(base_url=b.url, timeout=60) as on_b,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(submit, on_a)
        with anyio.fail_after(20):
            await speaking.wait()
            tg.start_soon(follow, on_b)
            await following.wait()
        rows = await a.runtime.db.messages.list_for_conversation(conversation)
        lost = [r for r in rows if r.role == "assistant"][-1]
        if before_loss is not None:
            assert lost.parent_id is not None
            await before_loss(lost.parent_id)
        turn = next(i for i, _ in sse_events(b"".join(bodies["owner"])) if i).rsplit("/", 1)[0]
        await lose_lease(a, conversation)
        assert await cluster_b.take_over(conversation, node_a.log.key(conversation, turn), turn)
        with anyio.fail_after(30):
            for event in done.values():
                await event.wait()
        tg.cancel_scope.cancel()
    return lost.id, turn


def answer_text(events: list[tuple[str | None, object]]) -> str:
    return "".join(
        d["delta"] for _, d in events if isinstance(d, dict) and d["type"] == "text-delta"
    )


async def test_a_lost_answer_is_answered_again_and_every_subscriber_follows_it(
    nodes: list[Node],
) -> None:
    a, b = nodes
    bodies: dict[str, list[bytes]] = {"owner": [], "follower": []}
    lost_id, lost_turn = await lose_the_owner_mid_answer(a, b, "r1", bodies)
    full = lorem(WORDS)
    for name, body in bodies.items():
        events = sse_events(b"".join(body))
        assert events[-1][1] == "[DONE]", name
        kinds = [d["type"] for _, d in events if isinstance(d, dict)]
        assert "error" not in kinds, name
        assert kinds[-1] == "finish", name
        retry = [d for _, d in events if isinstance(d, dict) and d["type"] == "data-retry"]
        assert len(retry) == 1 and retry[0]["transient"] is True, name
        assert retry[0]["data"]["message"] == NODE_LOST_RETRIED
        at = kinds.index("data-retry")
        before, after = events[: at + 1], events[at + 1 :]
        partial = answer_text(before)
        # What was seen of the lost answer is a strict prefix; after the notice, the whole new
        # answer arrives, on a new turn whose cursors a resume can use.
        assert partial and full.startswith(partial) and partial != full, name
        assert answer_text(after) == full, name
        new_turns = {i.rsplit("/", 1)[0] for i, _ in after if i}
        assert len(new_turns) == 1 and lost_turn not in new_turns, name
    rows = await b.runtime.db.messages.list_for_conversation("r1")
    assistants = [r for r in rows if r.role == "assistant"]
    assert all(r.status != "pending" for r in rows)
    lost = next(r for r in assistants if r.id == lost_id)
    assert lost.status == "error"
    errors = [p for p in lost.parts if p["type"] == "data-error"]
    assert len(errors) == 1 and NODE_LOST_RETRIED in str(errors[0])
    kept = "".join(p.get("text", "") for p in lost.parts if p["type"] == "text")
    assert kept and full.startswith(kept)
    again = [r for r in assistants if r.id != lost_id]
    assert len(again) == 1
    assert again[0].status == "success" and again[0].parent_id == lost.parent_id
    assert again[0].model_id == lost.model_id
    assert "".join(p.get("text", "") for p in again[0].parts if p["type"] == "text") == full
    cluster_b = b.takeover
    assert cluster_b.retried == 1


async def test_a_resume_by_cursor_of_the_lost_turn_reaches_the_new_answer(
    nodes: list[Node],
) -> None:
    a, b = nodes
    bodies: dict[str, list[bytes]] = {"owner": [], "follower": []}
    _, lost_turn = await lose_the_owner_mid_answer(a, b, "r2", bodies)
    seen = sse_events(b"".join(bodies["follower"]))
    cursor = next(i for i, _ in seen if i and i.startswith(lost_turn + "/"))
    async with httpx.AsyncClient(base_url=a.url, timeout=30) as on_a:
        r = await on_a.get("/api/chat/r2/stream", headers={"Last-Event-ID": cursor})
    events = sse_events(r.content)
    first = [i for i, _ in seen].index(cursor)
    # Exactly what the live follower got after that cursor, through the lost turn and the new.
    assert [d for _, d in events] == [d for _, d in seen[first + 1 :]]


async def test_an_answer_lost_too_often_is_ended_with_the_error(nodes: list[Node]) -> None:
    a, b = nodes
    node_b = b.cluster
    # The user message was already answered again as often as allowed.
    rows_before: dict[str, list[bytes]] = {"owner": [], "follower": []}

    async def answered_again_already(user_message_id: str) -> None:
        counter = f"{node_b.prefix}:retries:r3:{user_message_id}"
        await node_b.redis.set(counter, MAX_OWNER_LOSS_RETRIES)

    lost_id, _ = await lose_the_owner_mid_answer(a, b, "r3", rows_before, answered_again_already)
    for body in rows_before.values():
        events = sse_events(b"".join(body))
        assert events[-1][1] == "[DONE]"
        assert events[-2][1]["type"] == "error"  # type: ignore[index]
        assert not any(isinstance(d, dict) and d["type"] == "data-retry" for _, d in events)
    rows = await b.runtime.db.messages.list_for_conversation("r3")
    assistants = [r for r in rows if r.role == "assistant"]
    assert [r.id for r in assistants] == [lost_id]
    assert assistants[0].status == "error"
    assert NODE_LOST in str(assistants[0].parts)
    assert NODE_LOST_RETRIED not in str(assistants[0].parts)  # the row does not promise a retry
