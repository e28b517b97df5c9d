"""``GET /api/sessions`` tells the sidebar which sessions a task run made (``fromTask``) and when
each was last active (``lastActivityAt``: its conversation's last update)."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx

from drupe.app import Runtime
from tests.gateway.sse import chat_body


async def test_task_sessions_are_flagged_and_activity_is_the_conversation(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    agent = (await client.post("/api/agents", json={"name": "helper"})).json()
    opened = await client.post(f"/api/agents/{agent['id']}/sessions", json={"title": "mine"})
    by_task = await client.post(f"/api/agents/{agent['id']}/sessions", json={"title": "nightly"})
    mine, nightly = opened.json(), by_task.json()
    await runtime.db.schedules.start_run(
        kind="scheduled",
        agent_id=agent["id"],
        session_id=nightly["id"],
        conversation_id=nightly["conversationId"],
        started_at=datetime.now(UTC),
    )
    before = {s["id"]: s for s in (await client.get("/api/sessions")).json()["items"]}
    assert before[mine["id"]]["fromTask"] is False
    assert before[nightly["id"]]["fromTask"] is True

    r = await client.post("/api/chat", json=chat_body(mine["conversationId"], "hello"))
    assert r.status_code == 200
    after = {s["id"]: s for s in (await client.get("/api/sessions")).json()["items"]}
    conversation = await runtime.db.conversations.get(mine["conversationId"])
    assert conversation is not None
    assert after[mine["id"]]["lastActivityAt"] == conversation.updated_at.isoformat()
    assert after[mine["id"]]["lastActivityAt"] > before[mine["id"]]["lastActivityAt"]
    assert await runtime.db.schedules.task_session_ids([]) == set()
