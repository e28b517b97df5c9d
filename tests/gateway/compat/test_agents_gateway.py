"""Agents over the gateway: ``GET /v1/agents`` and turns on agent sessions through Chat
Completions and Responses (model ``agent:<id>`` / ``agent-session:<id>``), watched live by a
UI-stream subscriber of the same conversation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import openai
import pytest

from drupe.persistence.agents import session_conversation_id
from tests.gateway.compat.conftest import Gateway
from tests.gateway.sse import Event, iter_events

PACED = "scripted:lorem?words=100&rate=50"  # live for ~2 s: room for a tab to attach


async def make_agent(gateway: Gateway, tmp_path: Path, model_id: str, name: str) -> str:
    workspace = tmp_path / f"ws-{name}"
    workspace.mkdir()
    record = await gateway.runtime.db.agents.create_agent(
        name=name, driver_type="inprocess", model_id=model_id, workspace=str(workspace)
    )
    return record.id


def text_of(chunks: list[dict[str, Any]]) -> str:
    return "".join(str(c.get("delta", "")) for c in chunks if c.get("type") == "text-delta")


async def test_agents_are_listed_with_their_gateway_model(gateway: Gateway, tmp_path: Path) -> None:
    agent_id = await make_agent(gateway, tmp_path, "scripted:echo", "echoer")
    headers = {"authorization": f"Bearer {gateway.key}"}
    async with httpx.AsyncClient(base_url=gateway.url, headers=headers) as http:
        listed = await http.get("/v1/agents")
    assert listed.status_code == 200
    [agent] = listed.json()["data"]
    assert agent["id"] == agent_id and agent["model"] == f"agent:{agent_id}"
    assert (agent["name"], agent["driver"], agent["agent_model"]) == (
        "echoer",
        "inprocess",
        "scripted:echo",
    )


async def test_a_turn_driven_through_chat_completions_streams_live_to_the_ui(
    gateway: Gateway, tmp_path: Path
) -> None:
    agent_id = await make_agent(gateway, tmp_path, PACED, "writer")
    session = await gateway.runtime.db.agents.create_session(agent_id, title="t", settings={})
    conversation_id = session_conversation_id(session.id)
    ui_events: list[Event] = []
    gateway_text: list[str] = []
    headers = {"authorization": f"Bearer {gateway.key}"}
    with anyio.fail_after(20):
        async with (
            gateway.openai() as client,
            httpx.AsyncClient(base_url=gateway.url, headers=headers, timeout=20) as http,
        ):
            stream = await client.chat.completions.create(
                model=f"agent-session:{session.id}",
                messages=[{"role": "user", "content": "write a while"}],
                stream=True,
            )
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    gateway_text.append(chunk.choices[0].delta.content)
                    break  # live: now a UI tab attaches to the same conversation
            async with http.stream("GET", f"/api/chat/{conversation_id}/stream") as watched:
                assert watched.status_code == 200
                async for chunk in stream:
                    if chunk.choices and chunk.choices[0].delta.content:
                        gateway_text.append(chunk.choices[0].delta.content)
                async for event in iter_events(watched):
                    ui_events.append(event)
    ui_chunks = [e.json for e in ui_events if e.data != "[DONE]"]
    assert ui_events[-1].data == "[DONE]"
    assert ui_chunks[0]["type"] == "start"  # the tab saw the turn from its start
    text = "".join(gateway_text)
    assert len(text.split()) == 100
    assert text_of(ui_chunks) == text  # the same stream, chunk for chunk
    rows = await gateway.runtime.db.messages.list_for_conversation(conversation_id)
    assert [row.role for row in rows] == ["user", "assistant"]
    assert rows[0].parts[0]["text"] == "write a while"
    assert rows[1].status == "success"
    assert "".join(p.get("text", "") for p in rows[1].parts if p["type"] == "text") == text


async def test_agent_model_opens_a_session_and_answers_in_the_responses_dialect(
    gateway: Gateway, tmp_path: Path
) -> None:
    agent_id = await make_agent(gateway, tmp_path, "scripted:echo", "echoer")
    async with gateway.openai() as client:
        raw = await client.responses.with_raw_response.create(
            model=f"agent:{agent_id}", input="hello agent"
        )
        reply = raw.parse()
        session_id = raw.headers["x-drupe-session-id"]
        again = await client.responses.create(
            model=f"agent-session:{session_id}", input="and again"
        )
        with pytest.raises(openai.NotFoundError):
            await client.responses.create(model="agent:nobody", input="x")
        with pytest.raises(openai.BadRequestError):
            await client.responses.create(
                model=f"agent-session:{session_id}", input="x", previous_response_id=reply.id
            )
    assert reply.output_text == "You said: hello agent"
    assert again.output_text == "You said: and again"
    sessions = await gateway.runtime.db.agents.list_sessions(agent_id)
    assert [s.id for s in sessions] == [session_id]
    rows = await gateway.runtime.db.messages.list_for_conversation(
        session_conversation_id(session_id)
    )
    assert [row.role for row in rows] == ["user", "assistant", "user", "assistant"]


async def test_a_busy_session_is_409_and_nothing_is_stored(
    gateway: Gateway, tmp_path: Path
) -> None:
    agent_id = await make_agent(gateway, tmp_path, "scripted:lorem?words=400&rate=40", "slow")
    session = await gateway.runtime.db.agents.create_session(agent_id, title="t", settings={})
    model = f"agent-session:{session.id}"
    with anyio.fail_after(20):
        async with gateway.openai() as client:
            stream = await client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "long"}], stream=True
            )
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    break
            with pytest.raises(openai.ConflictError) as caught:
                await client.chat.completions.create(
                    model=model, messages=[{"role": "user", "content": "second"}]
                )
            await stream.close()
            # Leaving the response detached it; the turn itself goes on (invariant 2).
            assert gateway.runtime.manager.is_live(session_conversation_id(session.id))
            await gateway.runtime.manager.abort_and_drain(session_conversation_id(session.id))
    assert "is answering" in caught.value.message
    rows = await gateway.runtime.db.messages.list_for_conversation(
        session_conversation_id(session.id)
    )
    assert [row.parts[0].get("text") for row in rows if row.role == "user"] == ["long"]
