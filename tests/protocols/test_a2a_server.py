"""The A2A server against the Python ``a2a-sdk`` client, over a real loopback server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskState,
)

from drupe.app import Runtime
from tests.gateway.conftest import LiveServer
from tests.protocols.a2a_support import (
    Rebuilt,
    a2a_client,
    artifact_text,
    make_agent,
    send_request,
)

SLOW = "scripted:lorem?words=120&rate=40"


async def _stored_answer(runtime: Runtime, task_id: str) -> tuple[str, str]:
    row = await runtime.db.messages.get(task_id)
    assert row is not None
    text = "".join(p["text"] for p in row.parts if p.get("type") == "text")
    return text, row.status


async def test_card_discovery_per_agent_and_directory(
    http: httpx.AsyncClient, runtime: Runtime, tmp_path: Path, server: LiveServer
) -> None:
    assert (await http.get("/.well-known/agent-card.json")).status_code == 404  # no agent yet
    agent_id = await make_agent(runtime, tmp_path, "scripted:echo")
    card = (await http.get(f"/a2a/{agent_id}/.well-known/agent-card.json")).json()
    assert card["name"] == "helper"
    assert card["capabilities"]["streaming"] is True
    assert card["supportedInterfaces"][0]["url"] == f"{server.url}/a2a/{agent_id}"
    assert card["supportedInterfaces"][0]["protocolBinding"] == "JSONRPC"
    assert card["supportedInterfaces"][0]["protocolVersion"] == "1.0"
    scheme = card["securitySchemes"]["drupeBearer"]["httpAuthSecurityScheme"]
    assert scheme["scheme"] == "bearer"
    assert card["securityRequirements"] == [{"schemes": {"drupeBearer": {}}}]
    # One agent: it is the directory's default.
    assert (await http.get("/.well-known/agent-card.json")).json()["name"] == "helper"
    assert (await http.get("/a2a/nope/.well-known/agent-card.json")).status_code == 404


async def test_stream_then_get_and_list(
    server: LiveServer, key: str, runtime: Runtime, tmp_path: Path
) -> None:
    agent_id = await make_agent(runtime, tmp_path, "scripted:echo")
    async with a2a_client(server.url, agent_id, key) as client:
        rebuilt = Rebuilt()
        async for event in client.send_message(send_request("hello a2a")):
            rebuilt.apply(event)
        task = rebuilt.task
        assert task is not None
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert rebuilt.text == "You said: hello a2a"
        stored, status = await _stored_answer(runtime, task.id)
        assert (stored, status) == (rebuilt.text, "success")
        got = await client.get_task(GetTaskRequest(id=task.id))
        assert got.status.state == TaskState.TASK_STATE_COMPLETED
        assert artifact_text(got) == rebuilt.text
        assert [p.text for p in got.history[0].parts] == ["hello a2a"]
        assert got.context_id == task.context_id
        # A second task in the same context (the session keeps the history).
        again = Rebuilt()
        async for event in client.send_message(send_request("more", context_id=task.context_id)):
            again.apply(event)
        assert again.text == "You said: more"
        listed = await client.list_tasks(ListTasksRequest(context_id=task.context_id))
        assert [t.id for t in listed.tasks] == [again.task.id, task.id]  # type: ignore[union-attr]
        assert listed.total_size == 2


async def test_send_without_streaming_returns_the_finished_task(
    server: LiveServer, key: str, runtime: Runtime, tmp_path: Path
) -> None:
    agent_id = await make_agent(runtime, tmp_path, "scripted:echo")
    async with a2a_client(server.url, agent_id, key, streaming=False) as client:
        events = [e async for e in client.send_message(send_request("plain"))]
    assert len(events) == 1 and events[0].HasField("task")
    task = events[0].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert artifact_text(task) == "You said: plain"


async def test_resubscribe_mid_stream_rebuilds_the_stored_answer_exactly(
    server: LiveServer, key: str, runtime: Runtime, tmp_path: Path
) -> None:
    agent_id = await make_agent(runtime, tmp_path, SLOW)
    async with a2a_client(server.url, agent_id, key) as client:
        first = Rebuilt()
        async for event in client.send_message(send_request("write")):
            first.apply(event)
            if first.updates == 5:
                break  # the connection drops mid-answer; the task goes on
        assert first.task is not None
        task_id = first.task.id
        again = Rebuilt()
        async for event in client.subscribe(SubscribeToTaskRequest(id=task_id)):
            again.apply(event)
        assert again.task is not None
        assert again.task.status.state == TaskState.TASK_STATE_COMPLETED
        stored, status = await _stored_answer(runtime, task_id)
        assert status == "success"
        assert again.text == stored and len(stored.split()) == 120
        assert again.text.startswith(first.text)


async def test_cancel_stops_the_turn_and_keeps_the_partial(
    server: LiveServer, key: str, runtime: Runtime, tmp_path: Path
) -> None:
    agent_id = await make_agent(runtime, tmp_path, SLOW)
    async with a2a_client(server.url, agent_id, key) as client:
        streamed = Rebuilt()
        canceled: dict[str, Any] = {}
        async for event in client.send_message(send_request("write")):
            streamed.apply(event)
            if streamed.updates == 4 and not canceled:
                assert streamed.task is not None
                canceled["task"] = await client.cancel_task(CancelTaskRequest(id=streamed.task.id))
        task = canceled["task"]
        assert task.status.state == TaskState.TASK_STATE_CANCELED
        assert streamed.task is not None
        assert streamed.task.status.state == TaskState.TASK_STATE_CANCELED
        stored, status = await _stored_answer(runtime, task.id)
        assert status == "paused" and stored and len(stored.split()) < 120
        assert artifact_text(task) == stored == streamed.text


async def test_a_message_into_a_working_task_is_a_steer(
    server: LiveServer, key: str, runtime: Runtime, tmp_path: Path
) -> None:
    agent_id = await make_agent(runtime, tmp_path, SLOW)
    async with a2a_client(server.url, agent_id, key) as client:
        first = Rebuilt()
        steered = Rebuilt()
        async with anyio.create_task_group() as tg:
            started = anyio.Event()

            async def read_first() -> None:
                async for event in client.send_message(send_request("write")):
                    first.apply(event)
                    if first.updates == 3:
                        started.set()

            tg.start_soon(read_first)
            with anyio.fail_after(20):
                await started.wait()
            assert first.task is not None
            request = send_request(
                "also mention cats",
                task_id=first.task.id,
                context_id=first.task.context_id,
                message_id="m-2",
            )
            async for event in client.send_message(request):
                steered.apply(event)
        assert steered.task is not None and steered.task.id == first.task.id
        assert steered.text == first.text  # the same task, followed from its start
        rows = await runtime.db.messages.list_for_conversation(
            f"agent-session:{first.task.context_id}"
        )
        steer = [r for r in rows if r.role == "user" and (r.metadata or {}).get("steer")]
        assert [r.parts[0]["text"] for r in steer] == ["also mention cats"]


async def test_list_tasks_pages_and_filters(
    server: LiveServer, key: str, runtime: Runtime, tmp_path: Path
) -> None:
    agent_id = await make_agent(runtime, tmp_path, "scripted:echo")
    async with a2a_client(server.url, agent_id, key) as client:
        ids = []
        for text in ("one", "two", "three"):
            rebuilt = Rebuilt()
            async for event in client.send_message(send_request(text)):
                rebuilt.apply(event)
            assert rebuilt.task is not None
            ids.append(rebuilt.task.id)
        first = await client.list_tasks(ListTasksRequest(page_size=2))
        assert [t.id for t in first.tasks] == [ids[2], ids[1]]
        assert first.total_size == 3 and first.next_page_token == "2"
        assert not first.tasks[0].artifacts  # includeArtifacts is off by default
        rest = await client.list_tasks(
            ListTasksRequest(page_size=2, page_token=first.next_page_token, include_artifacts=True)
        )
        assert [t.id for t in rest.tasks] == [ids[0]] and rest.next_page_token == ""
        assert artifact_text(rest.tasks[0]) == "You said: one"
        done = await client.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_COMPLETED))
        assert done.total_size == 3
        working = await client.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_WORKING))
        assert working.total_size == 0 and list(working.tasks) == []
