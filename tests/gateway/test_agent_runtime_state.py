"""``GET /api/sessions/{id}`` reports the host's runtime state; approvals deny in place.

The test plays the agent runtime with the shipped ``FakeDriver`` (registered on the running
server's driver registry, non-steerable so a follow-up while busy is queued), over a real
uvicorn server. Ordering is proven, never waited for: the host's reader applies runtime events
in order, so once a chunk emitted AFTER an event is seen on the SSE stream, that event was
applied; and a follow-up is queued before its ``POST /api/chat`` answers its headers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from drupe.app import Runtime
from drupe.chunks.accumulate import accumulate
from drupe.sessions.drivers.base import (
    CompactionAnchor,
    CompactionComplete,
    CompactionStart,
    ContextUsage,
)
from drupe.testing.fake_driver import FakeConnection, FakeDriver
from tests.gateway.sse import Event, chat_body, chunks, iter_events


def step(part: str, *words: str) -> list[dict[str, Any]]:
    return [
        {"type": "start-step"},
        {"type": "text-start", "id": part},
        *({"type": "text-delta", "id": part, "delta": w} for w in words),
        {"type": "text-end", "id": part},
        {"type": "finish-step"},
    ]


async def until(events: AsyncIterator[Event], into: list[Event], delta: str) -> None:
    async for event in events:
        into.append(event)
        if event.data != "[DONE]" and event.json.get("delta") == delta:
            return
    raise AssertionError(f"the stream ended before the delta {delta!r}")


async def fake_session(
    http: httpx.AsyncClient, runtime: Runtime, tmp_path: Path
) -> tuple[FakeDriver, str, str]:
    driver = FakeDriver("fake", steerable=False)
    assert runtime.drivers is not None
    runtime.drivers.register(driver)
    r = await http.post(
        "/api/agents",
        json={"name": "fake", "driverType": "fake", "modelId": "fake-model"},
    )
    assert r.status_code == 201, r.text
    session = (await http.post(f"/api/agents/{r.json()['id']}/sessions", json={})).json()
    return driver, session["id"], session["conversationId"]


async def test_session_state_shows_compaction_usage_and_queued_follow_ups(
    server: Any, runtime: Runtime, tmp_path: Path
) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=20) as http:
        r = await http.post("/api/agents", json={"name": "x", "driverType": "fake"})
        assert r.status_code == 422 and "unknown driver 'fake'" in r.json()["detail"]
        driver, sid, cid = await fake_session(http, runtime, tmp_path)
        r = await http.post("/api/agents", json={"name": "no model", "driverType": "fake"})
        assert r.status_code == 422 and "needs a model id" in r.json()["detail"]
        first: list[Event] = []
        async with http.stream("POST", "/api/chat", json=chat_body(cid, "first")) as response:
            assert response.status_code == 200
            events = iter_events(response)
            connection: FakeConnection = await driver.wait_sent(1)
            connection.emit(CompactionStart(trigger="auto"))
            connection.emit(ContextUsage({"totalTokens": 900, "maxTokens": 1000}))
            connection.emit_chunks(step("a", "one "))
            await until(events, first, "one ")
            state = (await http.get(f"/api/sessions/{sid}")).json()
            runtime_state = state["runtime"]
            assert runtime_state["busy"] is True and runtime_state["compacting"] is True
            assert runtime_state["contextUsage"] == {"totalTokens": 900, "maxTokens": 1000}
            assert (
                runtime_state["execution"] == "turn" and runtime_state["connection"] == "connected"
            )
            assert state["status"] == "streaming"

            # a follow-up while busy is queued (this runtime cannot steer), not a second turn
            second: list[Event] = []
            async with http.stream("POST", "/api/chat", json=chat_body(cid, "second")) as other:
                assert other.status_code == 200
                queued = (await http.get(f"/api/sessions/{sid}")).json()["runtime"]
                assert len(queued["pendingFollowUps"]) == 1
                assert len(driver.sent) == 1 and driver.connects == 1

                anchor = CompactionAnchor(trigger="auto", completed_at=1.0, pre_tokens=900)
                connection.emit(CompactionComplete(anchor))
                connection.emit_chunks(step("b", "two"))
                await until(events, first, "two")
                settled = (await http.get(f"/api/sessions/{sid}")).json()["runtime"]
                assert settled["compacting"] is False and settled["busy"] is True
                connection.complete()
                async for event in events:
                    first.append(event)

                await driver.wait_sent(2)  # the queued follow-up became the next turn
                connection.emit_chunks(step("c", "answer"))
                connection.complete()
                async for event in iter_events(other):
                    second.append(event)

    assert first[-1].data == "[DONE]" and second[-1].data == "[DONE]"
    answer = accumulate(chunks(first[:-1]))
    assert [p["type"] for p in answer["parts"] if p["type"] != "step-start"] == [
        "text",
        "data-compaction-anchor",
        "text",
    ]
    rows = await runtime.db.messages.list_for_conversation(cid)
    assert [(r.role, r.status) for r in rows] == [
        ("user", "success"),
        ("assistant", "success"),
        ("user", "success"),
        ("assistant", "success"),
    ]
    assert accumulate(chunks(second[:-1]))["id"] == rows[3].id
    assert driver.sent[1][1].message["id"] == rows[2].id


async def test_a_denied_agent_approval_reaches_the_runtime_and_the_stream(
    server: Any, runtime: Runtime, tmp_path: Path
) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=20) as http:
        driver, sid, cid = await fake_session(http, runtime, tmp_path)
        seen: list[Event] = []
        async with http.stream("POST", "/api/chat", json=chat_body(cid, "go")) as response:
            events = iter_events(response)
            connection = await driver.wait_sent(1)
            connection.emit_chunks(
                [
                    {"type": "start-step"},
                    {"type": "tool-input-available", "toolCallId": "c1", "toolName": "rm",
                     "input": {}},
                ]
            )  # fmt: skip
            connection.request_approval("ap1", "c1", "rm")
            connection.emit_chunks(step("t", "waiting"))
            await until(events, seen, "waiting")
            pending = (await http.get(f"/api/sessions/{sid}")).json()["runtime"]
            assert pending["pendingApprovals"] == [{"approvalId": "ap1", "toolCallId": "c1"}]
            decisions = {"decisions": [{"approvalId": "ap1", "approved": False, "reason": "no"}]}
            r = await http.post(f"/api/sessions/{sid}/approvals", json=decisions)
            assert r.json() == {"ok": True, "results": [{"approvalId": "ap1", "ok": True}]}
            assert await connection.wait_approval("ap1") == (False, "no")
            assert (await http.get(f"/api/sessions/{sid}")).json()["runtime"][
                "pendingApprovals"
            ] == []
            connection.complete()
            async for event in events:
                seen.append(event)
    kinds = [c["type"] for c in chunks(seen[:-1])]
    assert "tool-approval-request" in kinds and "tool-output-denied" in kinds
    tool = next(p for p in accumulate(chunks(seen[:-1]))["parts"] if p.get("toolCallId") == "c1")
    assert tool["state"] == "output-denied"
