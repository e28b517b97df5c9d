"""Agent sessions through the chat routes: a stop reaches the host, agent approvals in place."""

from __future__ import annotations

from pathlib import Path

import httpx

from drupe.admission.base import Submit
from drupe.app import Runtime
from drupe.testing.recording import RecordingListener


async def _session(runtime: Runtime, tmp_path: Path, model: str) -> str:
    agent = await runtime.db.agents.create_agent(
        name="worker", driver_type="inprocess", model_id=model, workspace=str(tmp_path / "ws")
    )
    session = await runtime.db.agents.create_session(agent.id)
    return session.conversation_id


async def test_stop_of_an_agent_session_pauses_the_turn_and_frees_the_session(
    runtime: Runtime, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    cid = await _session(runtime, tmp_path, "scripted:lorem?words=400&rate=40")
    tab = RecordingListener("wc")
    await runtime.dispatcher.dispatch(
        Submit(conversation_id=cid, parts=[{"type": "text", "text": "write a lot"}]), [tab]
    )
    assert runtime.manager.is_live(cid)
    response = await client.post(f"/api/chat/{cid}/stop")
    assert response.status_code == 200 and response.json()["stopped"] is True
    rows = await runtime.db.messages.list_for_conversation(cid)
    assert [r.role for r in rows] == ["user", "assistant"]
    assert rows[1].status == "paused"
    assert runtime.sessions is not None
    assert not runtime.sessions.is_busy(cid.split(":", 1)[1])


async def test_unknown_agent_approval_is_not_ok(
    runtime: Runtime, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    cid = await _session(runtime, tmp_path, "scripted:echo")
    response = await client.post(
        f"/api/chat/{cid}/approvals",
        json={"decisions": [{"approvalId": "nope", "approved": True}]},
    )
    assert response.status_code == 200
    assert response.json()["ok"] is False
