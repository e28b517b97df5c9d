"""``POST /ag-ui/{target}`` against a real server on loopback, with scripted models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from drupe.app import Runtime
from tests.protocols.agui_sse import events, parse, run_input, target, text_of


def _stored_text(detail: dict[str, Any]) -> str:
    row = [m for m in detail["messages"] if m["role"] == "assistant"][-1]
    return "".join(p["text"] for p in row["parts"] if p["type"] == "text")


async def test_a_text_run_is_a_stored_turn_in_the_thread(http: httpx.AsyncClient) -> None:
    response = await http.post("/ag-ui/scripted:echo", json=run_input("th-1", "hello agui"))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    got = parse(response.text)
    assert got[0] == {
        "type": "RUN_STARTED",
        "threadId": "th-1",
        "runId": "run-1",
        "protocolVersion": "1.0",
    }
    assert got[-1]["type"] == "RUN_FINISHED" and got[-1]["outcome"] == {"type": "success"}
    detail = (await http.get("/api/conversations/th-1")).json()
    assert text_of(got) == _stored_text(detail) == "You said: hello agui"
    message_id = next(e["messageId"] for e in got if e["type"] == "TEXT_MESSAGE_START")
    assert message_id == detail["messages"][-1]["id"]  # the AG-UI message is the stored row

    # The next run in the same thread continues the same conversation (Drupe keeps history).
    again = parse(
        (await http.post("/ag-ui/scripted:echo", json=run_input("th-1", "again", "run-2"))).text
    )
    assert text_of(again) == "You said: again"
    detail = (await http.get("/api/conversations/th-1")).json()
    assert [m["role"] for m in detail["messages"]] == ["user", "assistant", "user", "assistant"]


async def test_reasoning_streams_as_reasoning_events(http: httpx.AsyncClient) -> None:
    got = parse((await http.post("/ag-ui/scripted:reasoning", json=run_input("th-r", "why"))).text)
    kinds = [e["type"] for e in got]
    assert kinds.index("REASONING_START") < kinds.index("REASONING_MESSAGE_CONTENT")
    assert kinds.index("REASONING_END") < kinds.index("TEXT_MESSAGE_START")
    thought = "".join(e["delta"] for e in got if e["type"] == "REASONING_MESSAGE_CONTENT")
    assert thought.startswith("The user asked something.")
    assert text_of(got) == "Having thought about it: why"


async def test_stop_ends_the_run_cancelled_with_the_partial_stored(
    http: httpx.AsyncClient,
) -> None:
    body = run_input("th-stop", "go")
    seen: list[dict[str, Any]] = []
    async with http.stream("POST", target("scripted:lorem?words=400&rate=40"), json=body) as r:
        assert r.status_code == 200
        async for event in events(r):
            seen.append(event)
            if event["type"] == "TEXT_MESSAGE_CONTENT" and len(seen) == 6:
                stopped = await http.post("/api/chat/th-stop/stop")
                assert stopped.json() == {"stopped": True}
    assert seen[-1]["type"] == "RUN_FINISHED"
    assert seen[-1]["outcome"] == {"type": "cancelled"}
    kinds = [e["type"] for e in seen]
    last_content = len(kinds) - 1 - kinds[::-1].index("TEXT_MESSAGE_CONTENT")
    assert "TEXT_MESSAGE_END" in kinds[last_content:]  # closed before the run ends
    detail = (await http.get("/api/conversations/th-stop")).json()
    row = detail["messages"][-1]
    assert row["status"] == "paused"
    assert _stored_text(detail) == text_of(seen)


async def test_a_second_client_is_enqueued_and_gets_its_own_answer(
    http: httpx.AsyncClient, runtime: Runtime
) -> None:
    first: list[dict[str, Any]] = []
    second: dict[str, Any] = {}

    speaking = anyio.Event()

    async def read_first(r: httpx.Response) -> None:
        async for event in events(r):
            first.append(event)
            if event["type"] == "TEXT_MESSAGE_CONTENT":
                speaking.set()

    async with (
        http.stream(
            "POST", target("scripted:lorem?words=60&rate=60"), json=run_input("th-dt", "one")
        ) as r,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(read_first, r)
        with anyio.fail_after(20):
            await speaking.wait()
        reply = await http.post("/ag-ui/scripted:echo", json=run_input("th-dt", "two", "run-2"))
        second["events"] = parse(reply.text)
    assert first[-1]["outcome"] == {"type": "success"}
    assert len(text_of(first).split()) == 60  # the running answer was not interrupted
    assert second["events"][-1]["type"] == "RUN_FINISHED"
    detail = (await http.get("/api/conversations/th-dt")).json()
    assert [m["role"] for m in detail["messages"]] == ["user", "assistant", "user", "assistant"]
    # The queued message is answered after the running answer, by the model it named (the
    # echo shows the steer wrapping Drupe gives a message sent while the model was working).
    assert text_of(second["events"]) == _stored_text(detail)
    assert text_of(second["events"]).startswith("You said: ") and "two" in text_of(second["events"])
    assert detail["messages"][-1]["metadata"]["modelId"] == "scripted:echo"


async def test_an_agent_thread_is_a_session_of_that_agent(
    http: httpx.AsyncClient, runtime: Runtime, tmp_path: Path
) -> None:
    agent = await runtime.db.agents.create_agent(
        name="helper", driver_type="inprocess", model_id="scripted:echo", workspace=str(tmp_path)
    )
    response = await http.post(f"/ag-ui/agent:{agent.id}", json=run_input("sess-ag-1", "hi"))
    got = parse(response.text)
    assert got, (response.status_code, response.text)
    assert got[-1]["type"] == "RUN_FINISHED", got
    assert text_of(got) == "You said: hi"
    session = await runtime.db.agents.get_session("sess-ag-1")
    assert session is not None and session.agent_id == agent.id
    # The same session by its own target.
    again = parse(
        (
            await http.post(
                "/ag-ui/agent-session:sess-ag-1", json=run_input("ignored", "more", "run-2")
            )
        ).text
    )
    assert text_of(again) == "You said: more"


@pytest.mark.parametrize(
    ("target", "body", "status", "words"),
    [
        ("scripted:echo", b"{not json", 400, "not valid JSON"),
        ("scripted:echo", b'{"threadId": "t"}', 400, "not a RunAgentInput"),
        ("nope:model", None, 404, "unknown model"),
        ("agent:missing", None, 404, "unknown agent"),
        ("agent-session:missing", None, 404, "unknown agent session"),
        (
            "scripted:echo",
            b'{"threadId": "th-bad", "runId": "r", "protocolVersion": "0.9", "messages": '
            b'[{"id": "u", "role": "user", "content": "x"}]}',
            400,
            "AG-UI 1.x",
        ),
    ],
)
async def test_bad_input_is_a_run_error_and_stores_nothing(
    http: httpx.AsyncClient, target: str, body: bytes | None, status: int, words: str
) -> None:
    content = body if body is not None else None
    if content is None:
        response = await http.post(f"/ag-ui/{target}", json=run_input("th-bad", "x"))
    else:
        response = await http.post(
            f"/ag-ui/{target}", content=content, headers={"content-type": "application/json"}
        )
    assert response.status_code == status
    error = response.json()
    assert error["type"] == "RUN_ERROR" and words in error["message"], error
    assert (await http.get("/api/conversations/th-bad")).status_code == 404
    assert (await http.get("/api/conversations/t")).status_code == 404


async def test_a_run_without_a_gateway_key_is_refused(anonymous: httpx.AsyncClient) -> None:
    response = await anonymous.post("/ag-ui/scripted:echo", json=run_input("th-anon", "x"))
    assert response.status_code == 401
    assert response.json()["type"] == "RUN_ERROR"
    assert (await anonymous.get("/api/conversations/th-anon")).status_code == 404


async def test_a_body_past_the_limit_is_a_run_error(
    http: httpx.AsyncClient, runtime: Runtime
) -> None:
    huge = "x" * (runtime.settings.limits.max_body_bytes + 10)
    response = await http.post("/ag-ui/scripted:echo", json=run_input("th-big", huge))
    assert response.status_code == 413
    assert response.json() == {
        "type": "RUN_ERROR",
        "message": f"request body is larger than the "
        f"{runtime.settings.limits.max_body_bytes}-byte limit",
        "code": "too_large",
    }
    assert (await http.get("/api/conversations/th-big")).status_code == 404


async def test_a_refused_agent_run_leaves_no_session_behind(
    http: httpx.AsyncClient, runtime: Runtime
) -> None:
    agent = await runtime.db.agents.create_agent(
        name="no-workspace", driver_type="inprocess", model_id="scripted:echo"
    )
    response = await http.post(f"/ag-ui/agent:{agent.id}", json=run_input("sess-none", "hi"))
    assert response.status_code == 422
    assert "workspace" in response.json()["message"]
    assert await runtime.db.agents.get_session("sess-none") is None


async def test_connect_follows_the_live_run_from_its_start(
    http: httpx.AsyncClient, runtime: Runtime
) -> None:
    model = "scripted:lorem?words=80&rate=40"
    seen: list[dict[str, Any]] = []
    async with http.stream("POST", target(model), json=run_input("th-conn", "go")) as r:
        async for event in events(r):
            seen.append(event)
            if len(seen) == 5:
                break  # the client drops; the answer goes on
    connect = "/ag-ui/connect/" + target(model).removeprefix("/ag-ui/")
    response = await http.post(connect, json=run_input("th-conn", "", "run-c"))
    assert response.status_code == 200
    again = parse(response.text)
    assert again[0]["type"] == "RUN_STARTED" and again[-1]["type"] == "RUN_FINISHED"
    detail = (await http.get("/api/conversations/th-conn")).json()
    assert text_of(again) == _stored_text(detail) and len(text_of(again).split()) == 80
    assert text_of(again).startswith(text_of(seen))
    # Long after the end (the grace period is over) there is nothing to connect to.
    runtime.manager.forget("th-conn")
    assert (await http.post(connect, json=run_input("th-conn", "", "run-d"))).status_code == 204
    missing = await http.post("/ag-ui/connect/agent:nobody", json=run_input("th-x", ""))
    assert missing.status_code == 404 and missing.json()["type"] == "RUN_ERROR"
