"""Background runs over HTTP (real uvicorn on loopback, the real runtime, scripted models).

A background run of an agent (in-process driver) is started, watched over the stream route,
resumed mid-answer by ``Last-Event-ID`` and cancelled; a ``background: true`` chat turn goes on
after its client disconnected. The paced scripted model answers slower than the test acts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from drupe.app import Runtime
from drupe.chunks.accumulate import accumulate
from tests.gateway.conftest import app, client, http, runtime, server, settings
from tests.gateway.sse import Event, chunks, iter_events, user_message

__all__ = ["app", "client", "http", "runtime", "server", "settings"]

PACED = "scripted:lorem?words=600&rate=150"


def _text(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p.get("type") == "text")


async def _agent(runtime: Runtime, tmp_path: Path, model: str) -> str:
    agent = await runtime.db.agents.create_agent(
        name="bg", driver_type="inprocess", model_id=model, workspace=str(tmp_path / "ws")
    )
    return agent.id


async def test_a_background_run_is_watched_resumed_mid_answer_and_cancelled(
    runtime: Runtime, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    agent = await _agent(runtime, tmp_path, PACED)
    started = await http.post(f"/api/agents/{agent}/runs", json={"prompt": "write"})
    assert started.status_code == 202
    run = started.json()
    assert run["status"] == "running" and run["kind"] == "background"
    conversation = run["conversationId"]
    assert conversation == f"agent-session:{run['sessionId']}"

    seen: list[Event] = []
    async with http.stream("GET", f"/api/chat/{conversation}/stream") as response:
        assert response.status_code == 200
        async for event in iter_events(response):
            seen.append(event)
            if sum(1 for c in chunks(seen) if c["type"] == "text-delta") >= 3:
                break  # the client goes away mid-answer
    cursor = next(e.id for e in reversed(seen) if e.id is not None)
    async with http.stream(
        "GET", f"/api/chat/{conversation}/stream", headers={"Last-Event-ID": cursor}
    ) as response:
        assert response.status_code == 200
        async for event in iter_events(response):
            seen.append(event)
            if sum(1 for c in chunks(seen) if c["type"] == "text-delta") >= 6:
                break
        status = (await http.get(f"/api/runs/{run['id']}")).json()
        assert status["status"] == "running" and status["result"]
        cancelled = await http.post(f"/api/runs/{run['id']}/cancel")
    assert cancelled.status_code == 200
    body = cancelled.json()
    assert body["cancelled"] is True and body["run"]["status"] == "cancelled"
    ids = [e.id for e in seen if e.id is not None]
    assert len(ids) == len(set(ids)), "the resume repeated nothing"
    rebuilt = _text(accumulate(chunks(seen)))
    final = (await http.get(f"/api/runs/{run['id']}")).json()
    assert final["status"] == "cancelled"
    rows = await runtime.db.messages.list_for_conversation(conversation)
    assert [(r.role, r.status) for r in rows] == [("user", "success"), ("assistant", "paused")]
    stored = "".join(p.get("text", "") for p in rows[1].parts if p.get("type") == "text")
    assert stored.startswith(rebuilt) and len(stored.split()) < 600
    assert final["result"] == stored.strip()
    again = await http.post(f"/api/runs/{run['id']}/cancel")
    assert again.json()["cancelled"] is False


async def test_a_background_run_finishes_with_its_whole_result(
    runtime: Runtime, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    agent = await _agent(runtime, tmp_path, "scripted:lorem?words=300")
    run = (await http.post(f"/api/agents/{agent}/runs", json={"prompt": "go"})).json()
    assert runtime.tasks is not None
    done = await runtime.tasks.wait_run(run["id"])
    assert done.status == "completed" and len(done.result or "") == 200
    final = (await http.get(f"/api/runs/{run['id']}")).json()
    assert len(final["result"].split()) == 300


async def test_bad_background_runs_are_4xx(runtime: Runtime, http: httpx.AsyncClient) -> None:
    missing = await http.post("/api/agents/nope/runs", json={"prompt": "go"})
    assert missing.status_code == 404 and "Agent not found" in missing.json()["detail"]
    empty = await http.post("/api/agents/nope/runs", json={"prompt": ""})
    assert empty.status_code == 422
    assert (await http.get("/api/runs/run_nope")).status_code == 404
    assert (await http.post("/api/runs/run_nope/cancel")).status_code == 404


async def test_a_background_chat_turn_continues_after_the_client_disconnects(
    runtime: Runtime, http: httpx.AsyncClient
) -> None:
    body = {
        "id": "c-bg",
        "messages": [user_message("hello")],
        "models": ["scripted:lorem?words=200&rate=400"],
        "background": True,
    }
    answer = await http.post("/api/chat", json=body)
    assert answer.status_code == 202
    run = answer.json()
    assert (run["kind"], run["status"], run["conversationId"]) == ("chat", "running", "c-bg")
    # A watcher attaches and leaves mid-answer: the turn goes on.
    async with http.stream("GET", "/api/chat/c-bg/stream") as response:
        async for event in iter_events(response):
            if event.data != "[DONE]" and event.json["type"] == "text-delta":
                break
    assert runtime.tasks is not None
    done = await runtime.tasks.wait_run(run["id"])
    assert done.status == "completed"
    rows = await runtime.db.messages.list_for_conversation("c-bg")
    assert rows[-1].status == "success"
    text = "".join(p.get("text", "") for p in rows[-1].parts if p.get("type") == "text")
    assert len(text.split()) == 200
    busy_body = {**body, "models": ["scripted:lorem?words=400&rate=100"]}
    first = await http.post("/api/chat", json={**busy_body, "id": "c-bg2"})
    assert first.status_code == 202
    second = await http.post("/api/chat", json={**busy_body, "id": "c-bg2"})
    assert second.status_code == 409
    await http.post("/api/chat/c-bg2/stop")


async def test_a_background_run_row_has_its_session_from_the_start(
    runtime: Runtime, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 23.14: the row is written with its session (docs/lifecycles/tasks.md)."""
    store = runtime.tasks.store if runtime.tasks is not None else None
    assert store is not None
    written: list[object] = []
    start_run = store.start_run

    async def recording(**kwargs: object) -> object:
        record = await start_run(**kwargs)  # type: ignore[arg-type]
        written.append(record)
        return record

    monkeypatch.setattr(store, "start_run", recording)
    agent = (await http.post("/api/agents", json={"name": "a", "modelId": "scripted:echo"})).json()
    response = await http.post(f"/api/agents/{agent['id']}/runs", json={"prompt": "go"})
    assert response.status_code == 202
    [first] = written
    assert first.session_id == response.json()["sessionId"]  # type: ignore[attr-defined]
    assert first.conversation_id == f"agent-session:{first.session_id}"  # type: ignore[attr-defined]
