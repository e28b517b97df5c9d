"""Agent and session REST routes; sessions streaming through the chat and event routes.

CRUD and validation go through httpx's ASGI transport; streaming (a live turn, a follow-up
while busy, delete under a live turn, approvals in place) through a real uvicorn server, with
the ``inprocess`` driver over scripted models.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx

from drupe.agent.models.script import Text, ToolCall
from drupe.agent.models.scripted import register_script
from drupe.app import Runtime
from drupe.chunks.accumulate import accumulate
from tests.gateway.sse import Event, chat_body, chunks, iter_events, parse_events

PACED = "scripted:lorem?words=150&rate=300"


def text_of(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")


async def make_agent(client: httpx.AsyncClient, tmp_path: Path, **fields: Any) -> dict[str, Any]:
    await anyio.Path(tmp_path / "ws").mkdir(exist_ok=True)
    body = {
        "name": "helper",
        "driverType": "inprocess",
        "modelId": "scripted:echo",
        "workspace": str(tmp_path / "ws"),
        **fields,
    }
    r = await client.post("/api/agents", json=body)
    assert r.status_code == 201, r.text
    agent: dict[str, Any] = r.json()
    return agent


async def make_session(client: httpx.AsyncClient, agent_id: str, **fields: Any) -> dict[str, Any]:
    r = await client.post(f"/api/agents/{agent_id}/sessions", json=fields)
    assert r.status_code == 201, r.text
    session: dict[str, Any] = r.json()
    return session


async def until_chunk(events: AsyncIterator[Event], kind: str, into: list[Event]) -> Event:
    async for event in events:
        into.append(event)
        if event.data != "[DONE]" and event.json.get("type") == kind:
            return event
    raise AssertionError(f"the stream ended before a {kind!r} chunk")


async def rest(events: AsyncIterator[Event], into: list[Event]) -> None:
    async for event in events:
        into.append(event)


# --- CRUD -------------------------------------------------------------------------------------


async def test_drivers_are_listed(client: httpx.AsyncClient) -> None:
    body = (await client.get("/api/drivers")).json()
    types = [d["type"] for d in body["items"]]
    assert "inprocess" in types
    assert {"type": "inprocess", "checksModels": True} in body["items"]
    assert body["permissionModes"] == ["default", "accept-edits", "plan", "bypass"]


async def test_agent_crud(client: httpx.AsyncClient, runtime: Runtime, tmp_path: Path) -> None:
    agent = await make_agent(client, tmp_path, instructions="be brief", tools=["read_file"])
    assert agent["driverType"] == "inprocess" and agent["modelId"] == "scripted:echo"
    assert agent["tools"] == ["read_file"] and agent["mcpServers"] == []
    assert agent["permissionMode"] == "default" and agent["instructions"] == "be brief"
    aid = agent["id"]
    assert (await client.get(f"/api/agents/{aid}")).json() == agent
    assert [a["id"] for a in (await client.get("/api/agents")).json()["items"]] == [aid]
    r = await client.patch(f"/api/agents/{aid}", json={"name": "renamed", "permissionMode": "plan"})
    assert r.status_code == 200, r.text
    assert r.json()["name"] == "renamed" and r.json()["permissionMode"] == "plan"
    assert r.json()["instructions"] == "be brief"
    cleared = await client.patch(f"/api/agents/{aid}", json={"modelId": None})
    assert cleared.status_code == 200 and cleared.json()["modelId"] is None
    stored = await runtime.db.agents.get_agent(aid)
    assert stored is not None and stored.model_id is None and stored.name == "renamed"
    assert (await client.delete(f"/api/agents/{aid}")).status_code == 204
    assert (await client.get(f"/api/agents/{aid}")).status_code == 404
    assert (await client.delete(f"/api/agents/{aid}")).status_code == 404
    assert await runtime.db.agents.get_agent(aid) is None


async def test_an_agent_gets_the_default_model_and_a_workspace_in_the_data_dir(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    r = await client.post("/api/agents", json={"name": "  plain  "})
    assert r.status_code == 201, r.text
    agent = r.json()
    assert agent["name"] == "plain" and agent["driverType"] == "inprocess"
    assert agent["modelId"] == "scripted:echo"  # the fixture's default model
    workspace = Path(agent["workspace"])
    assert workspace == runtime.settings.data_dir / "workspaces" / agent["id"]
    assert await anyio.Path(workspace).is_dir()


async def test_bad_agents_are_refused_with_a_clear_422(
    client: httpx.AsyncClient, runtime: Runtime, tmp_path: Path
) -> None:
    async def refused(body: dict[str, Any], *needles: str) -> None:
        r = await client.post("/api/agents", json={"name": "x", **body})
        assert r.status_code == 422, (body, r.text)
        detail = r.json()["detail"]
        for needle in needles:
            assert needle in detail, (needle, detail)

    await refused({"driverType": "nope"}, "unknown driver 'nope'", "inprocess")
    await refused({"modelId": "nope:x"}, "unknown model 'nope:x'")
    await refused({"modelId": "no-colon"}, "unknown model 'no-colon'")
    await refused({"permissionMode": "yolo"}, "permissionMode")
    await refused({"colour": "red"}, "colour")
    await refused({"name": ""}, "name")
    await refused({"tools": "read_file"}, "tools")
    afile = tmp_path / "a-file"
    afile.write_text("x")
    await refused({"workspace": str(afile)}, "not a directory")
    await refused({"workspace": str(tmp_path / "missing")}, "not a directory")
    await refused({"workspace": "relative/dir"}, "not an absolute path")
    assert not await anyio.Path(tmp_path / "missing").exists()
    assert (await client.get("/api/agents")).json()["items"] == []
    assert await runtime.db.agents.list_agents() == []

    agent = await make_agent(client, tmp_path)
    aid = agent["id"]
    for body, needle in [
        ({"driverType": "nope"}, "inprocess"),
        ({"modelId": "nope:x"}, "unknown model"),
        ({"name": None}, "name: cannot be null"),
        ({"workspace": str(afile)}, "not a directory"),
    ]:
        r = await client.patch(f"/api/agents/{aid}", json=body)
        assert r.status_code == 422 and needle in r.json()["detail"], (body, r.text)
    assert (await client.get(f"/api/agents/{aid}")).json() == agent
    assert (await client.patch("/api/agents/agent_nope", json={"name": "y"})).status_code == 404
    assert (await client.get("/api/agents/" + "a" * 300)).status_code == 404


async def test_session_crud(client: httpx.AsyncClient, runtime: Runtime, tmp_path: Path) -> None:
    agent = await make_agent(client, tmp_path)
    aid = agent["id"]
    session = await make_session(client, aid, title="first")
    sid = session["id"]
    assert session["agentId"] == aid and session["title"] == "first"
    assert session["conversationId"] == f"agent-session:{sid}"
    assert session["status"] == "idle"
    assert session["runtime"] == {
        "busy": False,
        "compacting": False,
        "execution": "idle",
        "connection": "disconnected",
        "pendingFollowUps": [],
        "pendingApprovals": [],
        "contextUsage": None,
        "lastTerminal": None,
        "commands": [],
    }
    other = await make_session(client, aid)
    listed = (await client.get(f"/api/agents/{aid}/sessions")).json()["items"]
    assert [s["id"] for s in listed] == [sid, other["id"]]
    everything = (await client.get("/api/sessions")).json()["items"]
    assert [s["id"] for s in everything] == [sid, other["id"]]
    by_agent = (await client.get("/api/sessions", params={"agentId": "agent_nope"})).json()
    assert by_agent["items"] == []
    renamed = await client.patch(f"/api/sessions/{sid}", json={"title": "renamed"})
    assert renamed.status_code == 200 and renamed.json()["title"] == "renamed"
    conversation = (await client.get(f"/api/conversations/agent-session:{sid}")).json()
    assert conversation["title"] == "renamed" and conversation["messages"] == []
    assert (await client.delete(f"/api/sessions/{sid}")).status_code == 204
    assert (await client.get(f"/api/sessions/{sid}")).status_code == 404
    assert (await client.get(f"/api/conversations/agent-session:{sid}")).status_code == 404
    assert (await client.delete(f"/api/sessions/{sid}")).status_code == 404
    # deleting the agent deletes its remaining sessions and their conversations
    assert (await client.delete(f"/api/agents/{aid}")).status_code == 204
    assert await runtime.db.agents.get_session(other["id"]) is None
    assert await runtime.db.conversations.get(other["conversationId"]) is None


async def test_bad_session_requests_are_4xx(client: httpx.AsyncClient, tmp_path: Path) -> None:
    agent = await make_agent(client, tmp_path)
    r = await client.post("/api/agents/agent_nope/sessions", json={})
    assert r.status_code == 404 and "agent_nope" in r.json()["detail"]
    r = await client.post(f"/api/agents/{agent['id']}/sessions", json={"settings": "shell"})
    assert r.status_code == 422 and "settings" in r.json()["detail"]
    assert (await client.get("/api/sessions/sess_nope")).status_code == 404
    assert (await client.patch("/api/sessions/sess_nope", json={"title": "x"})).status_code == 404
    decisions = {"decisions": [{"approvalId": "a1", "approved": True}]}
    r = await client.post("/api/sessions/sess_nope/approvals", json=decisions)
    assert r.status_code == 404
    session = await make_session(client, agent["id"])
    r = await client.post(f"/api/sessions/{session['id']}/approvals", json={"decisions": []})
    assert r.status_code == 422
    r = await client.post(f"/api/sessions/{session['id']}/approvals", json=decisions)
    assert r.status_code == 200
    assert r.json() == {"ok": False, "results": [{"approvalId": "a1", "ok": False}]}


# --- sessions through the chat and event routes ----------------------------------------------


async def test_a_session_turn_streams_through_the_chat_route_and_is_persisted(
    client: httpx.AsyncClient, runtime: Runtime, tmp_path: Path
) -> None:
    agent = await make_agent(client, tmp_path)
    session = await make_session(client, agent["id"])
    cid = session["conversationId"]
    r = await client.post("/api/chat", json=chat_body(cid, "hello agent"))
    assert r.status_code == 200, r.text
    assert r.headers["x-vercel-ai-ui-message-stream"] == "v1"
    events = parse_events(r.text)
    assert events[-1].data == "[DONE]"
    message = accumulate(chunks(events[:-1]))
    assert text_of(message) == "You said: hello agent"
    detail = (await client.get(f"/api/conversations/{cid}")).json()
    user, answer = detail["messages"]
    assert user["role"] == "user" and answer["role"] == "assistant"
    assert answer["id"] == message["id"] and answer["status"] == "success"
    assert answer["parentId"] == user["id"] and answer["parts"] == message["parts"]
    state = (await client.get(f"/api/sessions/{session['id']}")).json()
    assert state["status"] == "done"
    assert state["runtime"]["busy"] is False and state["runtime"]["lastTerminal"] == "success"
    assert state["runtime"]["connection"] == "connected"
    # Within the grace period a resume replays the finished answer.
    resumed = await client.get(f"/api/chat/{cid}/stream")
    assert resumed.status_code == 200
    assert accumulate(chunks(parse_events(resumed.text)))["parts"] == message["parts"]
    # an unknown session is a 404 and leaves nothing behind
    r = await client.post("/api/chat", json=chat_body("agent-session:sess_nope", "hi"))
    assert r.status_code == 404
    assert await runtime.db.conversations.get("agent-session:sess_nope") is None


async def test_a_follow_up_while_busy_is_queued_not_a_second_turn(
    server: Any, runtime: Runtime, tmp_path: Path
) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=20) as http:
        agent = await make_agent(http, tmp_path, modelId=PACED)
        session = await make_session(http, agent["id"])
        sid, cid = session["id"], session["conversationId"]
        first: list[Event] = []
        second: list[Event] = []
        async with http.stream("POST", "/api/chat", json=chat_body(cid, "first")) as response:
            assert response.status_code == 200
            events = iter_events(response)
            await until_chunk(events, "text-delta", first)
            busy = (await http.get(f"/api/sessions/{sid}")).json()
            assert busy["runtime"]["busy"] is True and busy["status"] == "streaming"
            assert runtime.manager.is_live(cid)
            async with anyio.create_task_group() as tg:
                tg.start_soon(rest, events, first)
                r = await http.post("/api/chat", json=chat_body(cid, "second"))
                assert r.status_code == 200
                second = parse_events(r.text)
    assert first[-1].data == "[DONE]" and second[-1].data == "[DONE]"
    rows = await runtime.db.messages.list_for_conversation(cid)
    assert [(r.role, r.status) for r in rows] == [
        ("user", "success"),
        ("assistant", "success"),
        ("user", "success"),
        ("assistant", "success"),
    ]
    u1, a1, u2, a2 = rows
    assert a1.parent_id == u1.id and u2.parent_id == a1.id and a2.parent_id == u2.id
    assert u2.metadata is not None and u2.metadata["steer"] is True
    # the follow-up's response is the stream of the turn that answers it
    answer = accumulate(chunks(second[:-1]))
    assert answer["id"] == a2.id and answer["parts"] == a2.parts
    assert accumulate(chunks(first[:-1]))["id"] == a1.id
    assert runtime.sessions is not None
    entry = runtime.sessions.entry(sid)
    assert entry is not None and not entry.state.queue and entry.state.last_terminal == "success"


async def test_events_route_follows_a_session(
    server: Any, runtime: Runtime, tmp_path: Path
) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=20) as http:
        agent = await make_agent(http, tmp_path)
        session = await make_session(http, agent["id"])
        cid = session["conversationId"]
        seen: list[Event] = []
        async with http.stream("GET", f"/api/conversations/{cid}/events") as response:
            assert response.status_code == 200
            events = iter_events(response)
            async for event in events:
                assert event.json == {"kind": "status", "status": "idle", "turnId": None}
                break
            r = await http.post("/api/chat", json=chat_body(cid, "watched"))
            assert r.status_code == 200
            async for event in events:
                seen.append(event)
                if event.json["kind"] == "status" and event.json["status"] == "done":
                    break
    parts = [e.json["chunk"] for e in seen if e.json["kind"] == "chunk"]
    assert text_of(accumulate(parts)) == "You said: watched"


async def test_deleting_a_session_stops_its_live_turn(
    server: Any, runtime: Runtime, tmp_path: Path
) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=20) as http:
        agent = await make_agent(http, tmp_path, modelId=PACED)
        session = await make_session(http, agent["id"])
        sid, cid = session["id"], session["conversationId"]
        seen: list[Event] = []
        async with http.stream("POST", "/api/chat", json=chat_body(cid, "long")) as response:
            events = iter_events(response)
            await until_chunk(events, "text-delta", seen)
            r = await http.delete(f"/api/sessions/{sid}")
            assert r.status_code == 204
            await rest(events, seen)
        assert not runtime.manager.is_live(cid)
        assert runtime.sessions is not None and runtime.sessions.entry(sid) is None
        assert await runtime.db.conversations.get(cid) is None
        assert (await http.get(f"/api/sessions/{sid}")).status_code == 404
    words = text_of(accumulate([c for c in chunks(seen) if c.get("type") != "error"]))
    assert 0 < len(words.split()) < 150


def _shell_model(name: str) -> str:
    register_script(
        name,
        [
            [ToolCall("shell", {"command": "echo made > made.txt && echo ran"}, "call-sh")],
            [Text("Finished.")],
        ],
    )
    return f"scripted:{name}"


async def test_agent_approvals_are_answered_in_place(
    server: Any, runtime: Runtime, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    async with httpx.AsyncClient(base_url=server.url, timeout=20) as http:
        agent = await make_agent(http, tmp_path, modelId=_shell_model("gateway-agents-shell"))
        session = await make_session(
            http, agent["id"], settings={"shell": True, "shell_timeout_s": 10.0}
        )
        sid, cid = session["id"], session["conversationId"]
        seen: list[Event] = []
        async with http.stream("POST", "/api/chat", json=chat_body(cid, "run it")) as response:
            events = iter_events(response)
            ask = (await until_chunk(events, "tool-approval-request", seen)).json
            assert ask["toolCallId"] == "call-sh"
            state = (await http.get(f"/api/sessions/{sid}")).json()
            assert state["runtime"]["pendingApprovals"] == [
                {"approvalId": ask["approvalId"], "toolCallId": "call-sh"}
            ]
            assert not (workspace / "made.txt").exists()  # it waits for the decision
            decisions = {"decisions": [{"approvalId": ask["approvalId"], "approved": True}]}
            r = await http.post(f"/api/sessions/{sid}/approvals", json=decisions)
            assert r.json() == {
                "ok": True,
                "results": [{"approvalId": ask["approvalId"], "ok": True}],
            }
            again = await http.post(f"/api/sessions/{sid}/approvals", json=decisions)
            assert again.json()["ok"] is False
            await rest(events, seen)
    assert (workspace / "made.txt").read_text() == "made\n"
    message = accumulate(chunks(seen[:-1]))
    assert text_of(message).endswith("Finished.")
    rows = await runtime.db.messages.list_for_conversation(cid)
    assert rows[-1].status == "success" and rows[-1].parts == message["parts"]
    tool = next(p for p in message["parts"] if p.get("toolCallId") == "call-sh")
    assert tool["state"] == "output-available" and tool["output"]["stdout"] == "ran\n"


async def test_an_agent_edit_reaches_its_connected_session(
    client: httpx.AsyncClient, runtime: Runtime, tmp_path: Path
) -> None:
    agent = await make_agent(client, tmp_path)
    session = await make_session(client, agent["id"])
    cid = session["conversationId"]
    first = await client.post("/api/chat", json=chat_body(cid, "before the edit"))
    assert text_of(accumulate(chunks(parse_events(first.text)[:-1]))) == "You said: before the edit"
    state = (await client.get(f"/api/sessions/{session['id']}")).json()["runtime"]
    assert state["connection"] == "connected"
    r = await client.patch(f"/api/agents/{agent['id']}", json={"modelId": "scripted:lorem?words=3"})
    assert r.status_code == 200 and r.json()["modelId"] == "scripted:lorem?words=3"
    second = await client.post("/api/chat", json=chat_body(cid, "after the edit"))
    answer = text_of(accumulate(chunks(parse_events(second.text)[:-1])))
    assert len(answer.split()) == 3 and "You said" not in answer
    rows = await runtime.db.messages.list_for_conversation(cid)
    assert [r.model_id for r in rows if r.role == "assistant"] == [
        "scripted:echo",
        "scripted:lorem?words=3",
    ]
