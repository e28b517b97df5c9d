"""Cluster mode across two real runtimes: attach and resume on another node, routed commands.

Both nodes run in this process on their own uvicorn servers, with one PostgreSQL database and
one Redis prefix: everything between them goes through PostgreSQL and Redis only.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest

from tests.cluster.nodes import Node, cluster_nodes, sse_events, text_of

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

PACED = "scripted:lorem?words=60&rate=120"
Pair = tuple[Node, Node, httpx.AsyncClient, httpx.AsyncClient]


@pytest.fixture
async def pair(tmp_path: Path, prefix: str) -> AsyncIterator[Pair]:
    """Nodes A and B, and an HTTP client on each."""
    async with (
        cluster_nodes(tmp_path, prefix) as (a, b),
        httpx.AsyncClient(base_url=a.url, timeout=30) as on_a,
        httpx.AsyncClient(base_url=b.url, timeout=30) as on_b,
    ):
        yield a, b, on_a, on_b


def chat_body(conversation: str, text: str, models: list[str] | None = None) -> dict[str, object]:
    body: dict[str, object] = {
        "id": conversation,
        "trigger": "submit-message",
        "messages": [
            {"id": f"u-{text}", "role": "user", "parts": [{"type": "text", "text": text}]}
        ],
    }
    if models is not None:
        body["models"] = models
    return body


async def stored_answer(http: httpx.AsyncClient, conversation: str) -> dict[str, object]:
    response = await http.get(f"/api/conversations/{conversation}")
    response.raise_for_status()
    rows: list[dict[str, object]] = response.json()["messages"]
    return [m for m in rows if m["role"] == "assistant"][-1]


async def test_a_subscriber_on_another_node_sees_the_same_answer_and_resumes_exactly(
    pair: Pair,
) -> None:
    _a, _b, on_a, on_b = pair
    first_on_b: list[bytes] = []
    owner_body: list[bytes] = []
    speaking = anyio.Event()

    async def submit() -> None:
        body = chat_body("c1", "hi", [PACED])
        async with on_a.stream("POST", "/api/chat", json=body) as r:
            assert r.status_code == 200
            async for chunk in r.aiter_bytes():
                owner_body.append(chunk)
                if b"text-delta" in chunk:
                    speaking.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(submit)
        with anyio.fail_after(10):
            await speaking.wait()
        # Attach on B mid-answer, read a little, then drop the connection.
        async with on_b.stream("GET", "/api/chat/c1/stream") as r:
            assert r.status_code == 200
            async for chunk in r.aiter_bytes():
                first_on_b.append(chunk)
                if b"text-delta" in b"".join(first_on_b) and len(first_on_b) > 2:
                    break
    owner = sse_events(b"".join(owner_body))
    assert owner[-1][1] == "[DONE]"
    seen = sse_events(b"".join(first_on_b).rsplit(b"\n\n", 1)[0] + b"\n\n")
    last_id = [i for i, _ in seen if i is not None][-1]
    # Resume on B after the last id it delivered: the rest, exactly.
    async with on_b.stream("GET", "/api/chat/c1/stream", headers={"Last-Event-ID": last_id}) as r:
        rest = sse_events(b"".join([c async for c in r.aiter_bytes()]))
    assert text_of(seen) + text_of(rest) == text_of(owner)
    ids = [i for i, _ in owner if i is not None]
    assert ids == sorted(set(ids), key=ids.index) and len(ids) == len(set(ids))
    # Resume on B at random cut points of what the owner's client saw: always exact.
    rng = random.Random(1234)
    cut_points = [i for i, (event_id, _) in enumerate(owner) if event_id is not None]
    for cut in rng.sample(cut_points, min(8, len(cut_points))):
        event_id = owner[cut][0]
        assert event_id is not None
        async with on_b.stream(
            "GET", "/api/chat/c1/stream", headers={"Last-Event-ID": event_id}
        ) as r:
            tail = sse_events(b"".join([c async for c in r.aiter_bytes()]))
        assert text_of(owner[: cut + 1]) + text_of(tail) == text_of(owner)
    row = await stored_answer(on_b, "c1")
    stored = "".join(p.get("text", "") for p in row["parts"] if p["type"] == "text")
    assert stored == text_of(owner) and row["status"] == "success"


async def _stream_until_speaking(
    http: httpx.AsyncClient, body: dict[str, object], chunks: list[bytes], speaking: anyio.Event
) -> None:
    async with http.stream("POST", "/api/chat", json=body) as r:
        assert r.status_code == 200
        async for chunk in r.aiter_bytes():
            chunks.append(chunk)
            if b"text-delta" in chunk:
                speaking.set()


async def test_stop_from_another_node_stops_the_owner_and_keeps_the_partial(pair: Pair) -> None:
    a, _b, on_a, on_b = pair
    owner_body: list[bytes] = []
    speaking = anyio.Event()
    slow = "scripted:lorem?words=400&rate=50"
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            _stream_until_speaking, on_a, chat_body("c2", "go", [slow]), owner_body, speaking
        )
        with anyio.fail_after(10):
            await speaking.wait()
        response = await on_b.post("/api/chat/c2/stop")
        assert response.status_code == 200 and response.json() == {"stopped": True}
    events = sse_events(b"".join(owner_body))
    assert [d for _, d in events][-2:] == [{"type": "abort"}, "[DONE]"]
    row = await stored_answer(on_b, "c2")
    stored = "".join(p.get("text", "") for p in row["parts"] if p["type"] == "text")
    assert row["status"] == "paused"
    assert stored == text_of(events) and 0 < len(stored.split()) < 400
    assert not a.runtime.manager.is_live("c2")


async def test_a_message_sent_to_another_node_while_answering_is_a_steer_answered_next(
    pair: Pair,
) -> None:
    a, b, on_a, on_b = pair
    owner_body: list[bytes] = []
    speaking = anyio.Event()
    paced = "scripted:lorem?words=40&rate=80"
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            _stream_until_speaking, on_a, chat_body("c3", "one", [paced]), owner_body, speaking
        )
        with anyio.fail_after(10):
            await speaking.wait()
        async with on_b.stream(
            "POST", "/api/chat", json=chat_body("c3", "two", ["scripted:echo"])
        ) as r:
            assert r.status_code == 200
            steer = sse_events(b"".join([c async for c in r.aiter_bytes()]))
    assert steer[-1][1] == "[DONE]"
    assert "two" in text_of(steer)  # the echo model answers the steer on the owner
    assert a.runtime.manager.outcomes["success"] == 2
    assert b.runtime.manager.outcomes == {"success": 0, "paused": 0, "error": 0}


async def test_the_conversation_event_stream_on_another_node_carries_every_turns_chunks(
    pair: Pair,
) -> None:
    _a, _b, on_a, on_b = pair
    await on_a.post("/api/chat", json=chat_body("c4", "first", ["scripted:echo"]))
    frames: list[dict[str, object]] = []
    async with on_b.stream("GET", "/api/conversations/c4/events") as events:
        assert events.status_code == 200
        answer = await on_a.post("/api/chat", json=chat_body("c4", "second", ["scripted:echo"]))
        expected = text_of(sse_events(answer.content))
        with anyio.fail_after(10):
            async for chunk in events.aiter_bytes():
                frames.extend(d for _, d in sse_events(chunk) if isinstance(d, dict))
                turns = {f["turnId"] for f in frames if f.get("kind") == "chunk"}
                finished = [
                    f
                    for f in frames
                    if f.get("kind") == "chunk"
                    and isinstance(f["chunk"], dict)
                    and f["chunk"].get("type") == "finish"
                ]
                if len(turns) == 2 and len(finished) == 2:
                    break
    second_turn = [f for f in frames if f.get("kind") == "chunk"][-1]["turnId"]
    got = "".join(
        str(f["chunk"]["delta"])  # type: ignore[index]
        for f in frames
        if f.get("kind") == "chunk"
        and f["turnId"] == second_turn
        and f["chunk"]["type"] == "text-delta"  # type: ignore[index]
    )
    assert got == expected and "second" in expected


async def test_approvals_sent_to_another_node_are_answered_by_the_owner(pair: Pair) -> None:
    from collections.abc import Mapping
    from typing import Any

    from drupe.agent.models.script import Text, ToolCall
    from drupe.agent.models.scripted import register_script
    from drupe.tools.base import ToolContext, ToolEntry

    a, b, on_a, on_b = pair
    ran_on: list[str] = []

    def tool_for(node: str) -> ToolEntry:
        async def remove(arguments: Mapping[str, Any], context: ToolContext) -> str:
            ran_on.append(node)
            return f"removed {arguments.get('path')}"

        return ToolEntry(
            name="rm",
            description="Remove a file",
            input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
            execute=remove,
            needs_approval=lambda args: True,
        )

    register_script(
        "cl-approve-rm",
        [[ToolCall("rm", {"path": "/tmp/x"}, tool_call_id="call-1")], [Text("All clean.")]],
    )
    a.runtime.tools.register(tool_for("a"))
    b.runtime.tools.register(tool_for("b"))
    r = await on_a.post("/api/chat", json=chat_body("c5", "clean", ["scripted:cl-approve-rm"]))
    request = next(
        d
        for _, d in sse_events(r.content)
        if isinstance(d, dict) and d["type"] == "tool-approval-request"
    )
    wrong = await on_b.post(
        "/api/chat/c5/approvals", json={"decisions": [{"approvalId": "nope", "approved": True}]}
    )
    assert wrong.status_code == 422 and "nope" in wrong.json()["detail"]
    ok = await on_b.post(
        "/api/chat/c5/approvals",
        json={"decisions": [{"approvalId": request["approvalId"], "approved": True}]},
    )
    assert ok.status_code == 200 and ok.json()["continued"] is True
    await a.runtime.manager.wait_settled("c5")
    answer = (await on_b.get("/api/conversations/c5")).json()["messages"][-1]
    tool = next(p for p in answer["parts"] if p["type"] == "tool-rm")
    assert tool["output"] == "removed /tmp/x" and ran_on == ["a"]
    assert "All clean." in "".join(p.get("text", "") for p in answer["parts"])


async def test_a_rollback_sent_to_another_node_restarts_the_answer_on_the_owner(
    pair: Pair,
) -> None:
    a, b, on_a, on_b = pair
    owner_body: list[bytes] = []
    speaking = anyio.Event()
    slow = "scripted:lorem?words=400&rate=50"
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            _stream_until_speaking, on_a, chat_body("c6", "one", [slow]), owner_body, speaking
        )
        with anyio.fail_after(10):
            await speaking.wait()
        body = chat_body("c6", "two", ["scripted:echo"])
        body["strategy"] = "rollback"
        second = await on_b.post("/api/chat", json=body)
        assert second.status_code == 200
    answer = text_of(sse_events(second.content))
    assert "two" in answer
    messages = (await on_b.get("/api/conversations/c6")).json()["messages"]
    assistants = [m for m in messages if m["role"] == "assistant"]
    assert len(assistants) == 1 and assistants[0]["status"] == "success"
    assert [m["role"] for m in messages] == ["user", "user", "assistant"]
    assert b.runtime.manager.outcomes["success"] == 0
    assert a.runtime.manager.outcomes == {"success": 1, "paused": 1, "error": 0}
