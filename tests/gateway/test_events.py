"""``GET /api/conversations/{id}/events``: multiplexed chunks and status, resumable by cursor."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
from fastapi import FastAPI

from drupe.app import Runtime
from drupe.chunks.accumulate import accumulate
from drupe.streaming.listeners.sse import parse_cursor
from tests.gateway.sse import Event, chat_body, iter_events

MODELS = ["scripted:lorem?words=40&rate=200", "scripted:echo"]


async def read_until_done(events: AsyncIterator[Event], into: list[Event]) -> bool:
    """Read events into ``into``; True once a ``done`` status arrived after some chunks."""
    async for event in events:
        into.append(event)
        payload = event.json
        done = payload["kind"] == "status" and payload["status"] == "done"
        if done and any(e.json["kind"] == "chunk" for e in into):
            return True
    return False


def by_execution(events: list[Event]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        payload = event.json
        if payload["kind"] == "chunk":
            out.setdefault(payload["executionId"], []).append(payload["chunk"])
    return out


async def test_events_carry_every_execution_and_status_changes(
    server: Any, runtime: Runtime
) -> None:
    await runtime.db.conversations.create("c-ev")
    seen: list[Event] = []
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=20) as http,
        http.stream("GET", "/api/conversations/c-ev/events") as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        events = iter_events(response)
        async for event in events:
            assert event.json == {"kind": "status", "status": "idle", "turnId": None}
            break
        r = await http.post("/api/chat", json=chat_body("c-ev", "both", models=MODELS))
        assert r.status_code == 200
        assert await read_until_done(events, seen)
    statuses = [e.json["status"] for e in seen if e.json["kind"] == "status"]
    assert statuses[0] == "pending" and "streaming" in statuses and statuses[-1] == "done"
    assert all(e.id is None for e in seen if e.json["kind"] == "status")
    chunk_events = [e for e in seen if e.json["kind"] == "chunk"]
    first = chunk_events[0].json
    assert set(first) == {"kind", "executionId", "attemptId", "seq", "modelId", "turnId", "chunk"}
    bad = [
        (e.id, e.data[:150]) for e in chunk_events if e.id != f"{e.json['turnId']}/{e.json['seq']}"
    ]
    assert not bad, bad
    rows = await runtime.db.messages.list_for_conversation("c-ev")
    stored = {r.model_id: r.parts for r in rows if r.role == "assistant"}
    rebuilt = {k: accumulate(v)["parts"] for k, v in by_execution(seen).items()}
    assert rebuilt == stored and set(rebuilt) == set(MODELS)


async def test_events_follow_the_next_turns_and_resume_by_last_event_id(
    server: Any, runtime: Runtime
) -> None:
    await runtime.db.conversations.create("c-ev2")
    seen: list[Event] = []
    async with httpx.AsyncClient(base_url=server.url, timeout=20) as http:
        await http.post("/api/chat", json=chat_body("c-ev2", "one"))  # a finished first turn
        async with http.stream("GET", "/api/conversations/c-ev2/events") as response:
            events = iter_events(response)
            async for _ in events:
                break  # the initial status
            async with http.stream(
                "POST", "/api/chat", json=chat_body("c-ev2", "two", models=[MODELS[0]])
            ) as chat:
                first_chunk_seen = False
                async for event in events:
                    seen.append(event)
                    if event.json["kind"] == "chunk" and len(seen) > 8:
                        first_chunk_seen = True
                        break
                assert first_chunk_seen
                last_id = next(e.id for e in reversed(seen) if e.id is not None)
                async with http.stream(
                    "GET", "/api/conversations/c-ev2/events", headers={"Last-Event-ID": last_id}
                ) as resumed:
                    assert await read_until_done(iter_events(resumed), seen)
                await chat.aread()
    cursors = [parse_cursor(e.id) for e in seen if e.id is not None]
    seqs = [c[1] for c in cursors if c]
    assert seqs == sorted(set(seqs)), "nothing duplicated"
    rows = await runtime.db.messages.list_for_conversation("c-ev2")
    last = [r for r in rows if r.role == "assistant"][-1]
    assert accumulate(by_execution(seen)[MODELS[0]])["parts"] == last.parts


async def test_closing_the_events_response_removes_its_observer_and_listener(
    app: FastAPI, runtime: Runtime
) -> None:
    await runtime.db.conversations.create("c-ev3")
    observers = runtime.manager.status_book.observer_count
    disconnect = anyio.Event()
    sent: list[dict[str, Any]] = []
    requested = False

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await disconnect.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body":
            assert runtime.manager.status_book.observer_count == observers + 1
            disconnect.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/api/conversations/c-ev3/events",
        "raw_path": b"/api/conversations/c-ev3/events",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"drupe.test")],
        "client": ("127.0.0.1", 1),
        "server": ("drupe.test", 80),
    }
    with anyio.fail_after(10):
        await app(scope, receive, send)
    assert sent[0]["status"] == 200
    assert b'"kind":"status"' in sent[1]["body"]
    assert runtime.manager.status_book.observer_count == observers
    assert runtime.manager.statistics()["subscribers"] == 0
