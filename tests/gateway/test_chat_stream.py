"""The UI message stream over a real uvicorn server: submit, subscribers, resume, stop, steer."""

from __future__ import annotations

import random
from typing import Any

import httpx

from drupe.app import Runtime
from drupe.chunks.accumulate import accumulate
from drupe.streaming.listeners.sse import parse_cursor
from tests.gateway.sse import Event, chat_body, chunks, iter_events, parse_events

PACED = "scripted:lorem?words=120&rate=150"


def text_of(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")


async def stored_answer(runtime: Runtime, conversation_id: str) -> Any:
    rows = await runtime.db.messages.list_for_conversation(conversation_id)
    return [r for r in rows if r.role == "assistant"][-1]


async def test_a_turn_streams_with_headers_cursors_and_done(
    http: httpx.AsyncClient, runtime: Runtime
) -> None:
    r = await http.post("/api/chat", json=chat_body("c-basic", "hello there"))
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/event-stream"
    assert r.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert r.headers["cache-control"] == "no-cache"
    events = parse_events(r.text)
    assert events[-1].data == "[DONE]"
    body = events[:-1]
    assert all(e.id is not None for e in body)
    cursors = [parse_cursor(e.id) for e in body]
    assert len({c[0] for c in cursors if c}) == 1
    seqs = [c[1] for c in cursors if c]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    message = accumulate(chunks(body))
    assert text_of(message) == "You said: hello there"
    row = await stored_answer(runtime, "c-basic")
    assert row.status == "success" and row.id == message["id"]
    assert row.parts == message["parts"]


async def test_two_subscribers_see_the_same_answer_and_closing_one_does_not_stop_it(
    server: Any, runtime: Runtime
) -> None:
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=20) as a,
        httpx.AsyncClient(base_url=server.url, timeout=20) as b,
    ):
        body = chat_body("c-two", "hi", models=[PACED])
        first: list[Event] = []
        async with a.stream("POST", "/api/chat", json=body) as response:
            assert response.status_code == 200
            async for event in iter_events(response):
                first.append(event)
                if len(first) == 6:
                    break
        # The first connection is closed: the answer goes on, and a second subscriber sees it.
        r = await b.get("/api/chat/c-two/stream")
        assert r.status_code == 200
        second = parse_events(r.text)
    assert second[-1].data == "[DONE]"
    full = accumulate(chunks(second))
    row = await stored_answer(runtime, "c-two")
    assert row.status == "success"
    assert row.parts == full["parts"]
    assert len(text_of(full).split()) == 120
    # What the first subscriber saw before leaving is a prefix of the same message.
    assert chunks(first)[0] == chunks(second)[0]


async def test_two_live_subscribers_rebuild_the_same_message(server: Any, runtime: Runtime) -> None:
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=20) as a,
        httpx.AsyncClient(base_url=server.url, timeout=20) as b,
    ):
        seen_a: list[Event] = []
        second: httpx.Response | None = None
        async with a.stream("POST", "/api/chat", json=chat_body("c-eq", "x", models=[PACED])) as r:
            async for event in iter_events(r):
                seen_a.append(event)
                if len(seen_a) == 3:
                    second = await b.get("/api/chat/c-eq/stream")
        assert second is not None
        ended = await a.get("/api/chat/c-eq/stream")  # in the grace period: the whole answer
        assert ended.status_code == 200
    stored = (await stored_answer(runtime, "c-eq")).parts
    assert accumulate(chunks(parse_events(ended.text)))["parts"] == stored
    assert accumulate(chunks(seen_a))["parts"] == stored
    assert accumulate(chunks(parse_events(second.text)))["parts"] == stored


async def test_resume_is_204_before_any_answer_and_404_for_an_unknown_conversation(
    client: httpx.AsyncClient,
) -> None:
    idle = (await client.post("/api/conversations", json={"title": "idle"})).json()["id"]
    r = await client.get(f"/api/chat/{idle}/stream")
    assert r.status_code == 204
    r = await client.get("/api/chat/never-seen/stream")
    assert r.status_code == 404


async def test_resume_replays_from_start_while_live(server: Any, runtime: Runtime) -> None:
    body = chat_body("c-rs", "x", models=[PACED])
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=20) as a,
        a.stream("POST", "/api/chat", json=body) as r,
    ):
        async for _ in iter_events(r):
            break
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as b:
            resumed = await b.get("/api/chat/c-rs/stream")
    events = parse_events(resumed.text)
    assert events[0].json["type"] == "start"
    row = await stored_answer(runtime, "c-rs")
    assert events[0].json["messageId"] == row.id
    assert accumulate(chunks(events))["parts"] == row.parts


async def test_resume_by_last_event_id_at_random_cut_points_rebuilds_the_exact_message(
    server: Any, runtime: Runtime
) -> None:
    """Property-style: several random cut points per turn, over several turns."""
    rng = random.Random(20261129)
    async with httpx.AsyncClient(base_url=server.url, timeout=20) as http:
        for turn in range(4):
            conversation_id = f"c-cut-{turn}"
            cuts = sorted(rng.sample(range(1, 70), 3))
            seen: list[Event] = []
            request = http.stream(
                "POST", "/api/chat", json=chat_body(conversation_id, "x", models=[PACED])
            )
            done = False
            for cut in [*cuts, None]:
                async with request as response:
                    assert response.status_code == 200, (turn, cut)
                    async for event in iter_events(response):
                        if event.data == "[DONE]":
                            done = True
                            break
                        seen.append(event)
                        if cut is not None and len(seen) >= cut:
                            break
                last_id = next(e.id for e in reversed(seen) if e.id is not None)
                request = http.stream(
                    "GET",
                    f"/api/chat/{conversation_id}/stream",
                    headers={"Last-Event-ID": last_id},
                )
            assert done
            ids = [parse_cursor(e.id) for e in seen if e.id is not None]
            assert [c[1] for c in ids if c] == sorted({c[1] for c in ids if c}), "no duplicate"
            rebuilt = accumulate(chunks(seen))
            row = await stored_answer(runtime, conversation_id)
            assert row.status == "success"
            assert rebuilt["parts"] == row.parts
            assert len(text_of(rebuilt).split()) == 120


async def test_stop_returns_after_the_partial_is_persisted(server: Any, runtime: Runtime) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=20) as http:
        seen: list[Event] = []
        body = chat_body("c-stop", "x", models=["scripted:lorem?words=400&rate=100"])
        async with http.stream("POST", "/api/chat", json=body) as response:
            async for event in iter_events(response):
                seen.append(event)
                if len(seen) == 6:
                    stop = await http.post("/api/chat/c-stop/stop")
                    assert stop.json() == {"stopped": True}
                    # The partial is stored before the stop returns.
                    row = await stored_answer(runtime, "c-stop")
                    assert row.status == "paused"
                    assert 0 < len(text_of({"parts": row.parts}).split()) < 400
        assert seen[-1].data == "[DONE]"
        assert seen[-2].json == {"type": "abort"}
        again = await http.post("/api/chat/c-stop/stop")
        assert again.json() == {"stopped": False}
        assert (await http.post("/api/chat/nope/stop")).status_code == 404


async def test_a_steer_is_answered_after_the_running_turn(server: Any, runtime: Runtime) -> None:
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=20) as a,
        httpx.AsyncClient(base_url=server.url, timeout=20) as b,
    ):
        body = chat_body("c-steer", "first", models=["scripted:lorem?words=60&rate=200"])
        async with a.stream("POST", "/api/chat", json=body) as response:
            async for _ in iter_events(response):
                steer = await b.post(
                    "/api/chat",
                    json=chat_body("c-steer", "and then?", models=["scripted:echo"]),
                )
                break
    events = parse_events(steer.text)
    assert events[-1].data == "[DONE]"
    message = accumulate(chunks(events))
    assert "and then?" in text_of(message)
    rows = await runtime.db.messages.list_for_conversation("c-steer")
    answers = [r for r in rows if r.role == "assistant"]
    assert [r.status for r in answers] == ["success", "success"]
    assert answers[-1].id == message["id"]
