"""Issue 8, point 9: an answer stays readable right after its end (a real uvicorn server)."""

from __future__ import annotations

from typing import Any

import httpx

from drupe.app import Runtime
from drupe.chunks.accumulate import accumulate
from tests.gateway.sse import chat_body, chunks, parse_events


async def _stored(runtime: Runtime, conversation_id: str) -> Any:
    rows = await runtime.db.messages.list_for_conversation(conversation_id)
    return [r for r in rows if r.role == "assistant"][-1]


async def test_resume_right_after_the_end_replays_the_finished_message(
    http: httpx.AsyncClient, runtime: Runtime
) -> None:
    first = await http.post("/api/chat", json=chat_body("c-grace", "hello there"))
    assert first.status_code == 200
    resumed = await http.get("/api/chat/c-grace/stream")
    assert resumed.status_code == 200
    events = parse_events(resumed.text)
    assert events[-1].data == "[DONE]"
    assert chunks(events)[-1]["type"] == "finish"
    row = await _stored(runtime, "c-grace")
    assert row.status == "success"
    assert accumulate(chunks(events))["parts"] == row.parts


async def test_resume_after_the_end_with_a_cursor_rebuilds_the_exact_message(
    http: httpx.AsyncClient,
) -> None:
    first = parse_events((await http.post("/api/chat", json=chat_body("c-cut", "abc"))).text)
    body = first[:-1]
    for cut in range(1, len(body)):
        seen = body[:cut]
        resumed = await http.get(
            "/api/chat/c-cut/stream", headers={"Last-Event-ID": str(seen[-1].id)}
        )
        assert resumed.status_code == 200
        rest = parse_events(resumed.text)
        assert rest[-1].data == "[DONE]"
        # The ring merges delta runs, so the events differ; the rebuilt message must not.
        assert accumulate(chunks(seen + rest)) == accumulate(chunks(body)), cut
        assert chunks(rest)[-1]["type"] == "finish"
