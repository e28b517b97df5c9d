"""REST routes, limits and bad input over httpx's ASGI transport: every mistake is a clear 4xx."""

from __future__ import annotations

import httpx
import pytest

from drupe.app import Runtime
from tests.gateway.sse import chat_body, parse_events, user_message


async def test_conversation_lifecycle(client: httpx.AsyncClient, runtime: Runtime) -> None:
    created = await client.post("/api/conversations", json={"title": "first"})
    assert created.status_code == 201
    conversation = created.json()
    assert conversation["title"] == "first" and conversation["status"] == "idle"
    cid = conversation["id"]
    r = await client.post("/api/chat", json=chat_body(cid, "hello"))
    assert r.status_code == 200 and parse_events(r.text)[-1].data == "[DONE]"
    detail = (await client.get(f"/api/conversations/{cid}")).json()
    assert detail["status"] == "done"
    assert [m["role"] for m in detail["messages"]] == ["user", "assistant"]
    user, answer = detail["messages"]
    assert answer["parentId"] == user["id"] and answer["modelId"] == "scripted:echo"
    assert set(answer) == {
        "id", "parentId", "role", "parts", "status", "modelId", "siblingsGroupId", "createdAt",
        "metadata",
    }  # fmt: skip
    renamed = await client.patch(f"/api/conversations/{cid}", json={"title": "renamed"})
    assert renamed.status_code == 200 and renamed.json()["title"] == "renamed"
    listing = (await client.get("/api/conversations")).json()
    assert listing["items"][0] == {
        "id": cid,
        "title": "renamed",
        "status": "done",
        "updatedAt": listing["items"][0]["updatedAt"],
        "ownerId": None,  # auth off: no owner
    }
    status = (await client.get("/api/status")).json()
    assert status["conversations"][cid] == "done"
    assert (await client.delete(f"/api/conversations/{cid}")).status_code == 204
    assert (await client.get(f"/api/conversations/{cid}")).status_code == 404
    assert await runtime.db.conversations.get(cid) is None


async def test_listing_is_paged_and_capped(client: httpx.AsyncClient) -> None:
    ids = [(await client.post("/api/conversations", json={})).json()["id"] for _ in range(7)]
    page = (await client.get("/api/conversations", params={"limit": 1000})).json()
    assert len(page["items"]) == 5  # Limits.max_page_size in the fixture
    rest = (await client.get("/api/conversations", params={"before": page["nextCursor"]})).json()
    seen = [i["id"] for i in page["items"] + rest["items"]]
    assert sorted(seen) == sorted(ids) and len(set(seen)) == 7
    bad = await client.get("/api/conversations", params={"before": "garbage"})
    assert bad.status_code == 422 and "cursor" in bad.json()["detail"]
    assert (await client.get("/api/conversations", params={"limit": 0})).status_code == 422


async def test_ephemeral_conversation_is_never_written(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    created = (await client.post("/api/conversations", json={"ephemeral": True})).json()
    cid = created["id"]
    r = await client.post("/api/chat", json=chat_body(cid, "secret"))
    assert r.status_code == 200
    assert await runtime.db.conversations.get(cid) is None
    detail = (await client.get(f"/api/conversations/{cid}")).json()
    assert [m["role"] for m in detail["messages"]] == ["user", "assistant"]
    assert (await client.delete(f"/api/conversations/{cid}")).status_code == 204
    assert (await client.get(f"/api/conversations/{cid}")).status_code == 404


async def test_regenerate_answers_the_last_user_message_again(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    await client.post("/api/chat", json=chat_body("c-regen", "again"))
    r = await client.post(
        "/api/chat",
        json={
            "id": "c-regen",
            "messages": [user_message("again")],
            "trigger": "regenerate-message",
        },
    )
    assert r.status_code == 200 and parse_events(r.text)[-1].data == "[DONE]"
    rows = await runtime.db.messages.list_for_conversation("c-regen")
    answers = [row for row in rows if row.role == "assistant"]
    assert len(answers) == 2 and answers[0].parent_id == answers[1].parent_id


async def test_models_status_health_mcp_and_metrics(client: httpx.AsyncClient) -> None:
    models = (await client.get("/api/models")).json()
    assert models["default"] == "scripted:echo"
    assert any(m["id"] == "scripted:echo" for m in models["models"])
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    assert (await client.get("/api/mcp")).json() == {"servers": []}
    await client.post("/api/chat", json=chat_body("c-metrics", "count me"))
    metrics = await client.get("/metrics")
    assert metrics.status_code == 200
    text = metrics.text
    assert "drupe_live_streams 0.0" in text
    assert 'drupe_terminal_outcomes_total{status="success"} 1.0' in text
    assert "drupe_chunks_total" in text and "drupe_subscribers" in text
    assert (await client.get("/openapi.json")).json()["info"]["title"] == "Drupe"
    assert (await client.get("/docs")).status_code == 200


async def test_static_ui_and_spa_fallback(client: httpx.AsyncClient) -> None:
    index = await client.get("/")
    assert index.status_code == 200 and "<html" in index.text.lower()
    assert index.headers["cache-control"] == "no-cache"
    route = await client.get("/c/some-conversation")
    assert route.status_code == 200 and route.text == index.text
    asset = next(p for p in index.text.split('"') if "assets/" in p and p.endswith(".js"))
    name = asset.rsplit("/", 1)[1]
    for url in (f"/assets/{name}", f"/c/some-conversation/assets/{name}"):
        cached = await client.get(url)
        assert cached.status_code == 200 and "immutable" in cached.headers["cache-control"]
    assert (await client.get("/assets/missing.js")).status_code == 404
    assert (await client.get("/api/unknown")).json() == {"detail": "no route GET /api/unknown"}
    assert (await client.get("/../../etc/passwd")).status_code in (200, 404)


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        ({"id": "has space", "messages": [user_message("x")]}, 422, "id"),
        ({"id": "x" * 129, "messages": [user_message("x")]}, 422, "id"),
        ({"messages": [user_message("x")]}, 422, "id: Field required"),
        ({"id": "c", "messages": "nope"}, 422, "messages"),
        ({"id": "c", "messages": []}, 422, "user message"),
        ({"id": "c", "messages": [{"role": "user", "parts": []}]}, 422, "no parts"),
        ({"id": "c", "messages": [{"role": "robot", "parts": []}]}, 422, "role"),
        ({"id": "c", "messages": [user_message("x")], "trigger": "nope"}, 422, "trigger"),
        ({"id": "c", "messages": [user_message("x")], "strategy": "nope"}, 422, "strategy"),
        ({"id": "c", "messages": [user_message("x")], "models": ["nope:x"]}, 422, "'nope:x'"),
        ({"id": "c", "messages": [user_message("x")], "models": ["scripted:zzz"]}, 422, "zzz"),
        ({"id": "c", "messages": [user_message("x")], "models": ["bare"]}, 422, "'bare'"),
        (
            {"id": "c", "messages": [user_message("x")], "models": ["scripted:echo"] * 2},
            422,
            "more than once",
        ),
        (
            {"id": "c", "messages": [user_message("x")], "models": ["scripted:echo"] * 9},
            422,
            "at most 8",
        ),
        ({"id": "c", "messages": [user_message("x" * 2001)]}, 413, "limit is 2000"),
        (
            {"id": "unknown-c", "messages": [user_message("x")], "trigger": "regenerate-message"},
            404,
            "unknown conversation",
        ),
        ({"id": "agent-session:nope", "messages": [user_message("x")]}, 404, "unknown"),
    ],
)
async def test_bad_chat_input_is_a_clear_4xx(
    client: httpx.AsyncClient, body: dict[str, object], status: int, needle: str
) -> None:
    r = await client.post("/api/chat", json=body)
    assert r.status_code == status, r.text
    assert needle in r.json()["detail"]


async def test_malformed_and_oversized_bodies(client: httpx.AsyncClient) -> None:
    r = await client.post(
        "/api/chat", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 422 and "JSON" in r.json()["detail"]
    big = b'{"id":"c","messages":[],"pad":"' + b"x" * (70 * 1024) + b'"}'
    r = await client.post("/api/chat", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and "limit" in r.json()["detail"]

    async def chunked() -> object:
        for _ in range(80):
            yield b"x" * 1024

    r = await client.post("/api/conversations", content=chunked())  # type: ignore[arg-type]
    assert r.status_code == 413


async def test_unknown_conversation_routes_are_404(client: httpx.AsyncClient) -> None:
    for method, url in [
        ("GET", "/api/conversations/nope"),
        ("DELETE", "/api/conversations/nope"),
        ("GET", "/api/conversations/nope/events"),
        ("GET", "/api/chat/nope/stream"),
        ("POST", "/api/chat/nope/stop"),
    ]:
        r = await client.request(method, url)
        assert r.status_code == 404, (method, url)
        assert r.json() == {"detail": "unknown conversation 'nope'"}
    r = await client.patch("/api/conversations/nope", json={"title": "x"})
    assert r.status_code == 404
    r = await client.post(
        "/api/chat/nope/approvals", json={"decisions": [{"approvalId": "a", "approved": True}]}
    )
    assert r.status_code == 404


async def test_approval_bodies_are_validated(client: httpx.AsyncClient) -> None:
    await client.post("/api/conversations", json={})
    await client.post("/api/chat", json=chat_body("c-appr", "x"))
    r = await client.post("/api/chat/c-appr/approvals", json={"decisions": []})
    assert r.status_code == 422 and "decisions" in r.json()["detail"]
    r = await client.post(
        "/api/chat/c-appr/approvals", json={"decisions": [{"approvalId": "a", "approved": "x"}]}
    )
    assert r.status_code == 422


async def test_busy_conversation_refuses_reject_and_regenerate(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    await runtime.db.conversations.create("c-busy")
    from drupe.admission.base import Submit

    await runtime.dispatcher.dispatch(
        Submit(
            conversation_id="c-busy",
            parts=[{"type": "text", "text": "long"}],
            model_ids=["scripted:lorem?words=500&rate=100"],
        )
    )
    r = await client.post("/api/chat", json=chat_body("c-busy", "x", strategy="reject"))
    assert r.status_code == 409 and "answering" in r.json()["detail"]
    r = await client.post(
        "/api/chat",
        json={"id": "c-busy", "messages": [user_message("x")], "trigger": "regenerate-message"},
    )
    assert r.status_code == 409 and "stop it before regenerating" in r.json()["detail"]
    stopped = await client.post("/api/chat/c-busy/stop")
    assert stopped.json() == {"stopped": True}


async def test_too_many_subscribers_is_429(client: httpx.AsyncClient, runtime: Runtime) -> None:
    from drupe.admission.base import Submit
    from drupe.testing.recording import RecordingListener

    await runtime.db.conversations.create("c-many")
    await runtime.dispatcher.dispatch(
        Submit(
            conversation_id="c-many",
            parts=[{"type": "text", "text": "long"}],
            model_ids=["scripted:lorem?words=500&rate=100"],
        ),
        [RecordingListener(f"r{i}") for i in range(3)],
    )
    runtime.manager.attach("c-many", RecordingListener("r3"))  # max_listeners=4 in the fixture
    r = await client.get("/api/chat/c-many/stream")
    assert r.status_code == 429 and "subscribers" in r.json()["detail"]
    await client.post("/api/chat/c-many/stop")


@pytest.mark.parametrize(
    ("origin", "status"),
    [
        (None, 200),
        ("http://drupe.test", 200),
        ("http://allowed.example", 200),
        ("http://evil.example", 403),
        ("null", 403),
    ],
)
async def test_browser_routes_check_origin(
    tmp_path: object, origin: str | None, status: int
) -> None:
    from pathlib import Path

    from drupe.api.app_factory import create_app
    from drupe.app import open_runtime
    from tests.gateway.conftest import make_settings

    assert isinstance(tmp_path, Path)
    settings = make_settings(tmp_path, allowed_origins=("http://allowed.example",))
    async with open_runtime(settings) as rt:
        transport = httpx.ASGITransport(create_app(rt))
        async with httpx.AsyncClient(transport=transport, base_url="http://drupe.test") as c:
            headers = {"origin": origin} if origin else {}
            r = await c.get("/api/conversations", headers=headers)
            assert r.status_code == status
            if status == 403:
                assert "cross-origin" in r.json()["detail"]
            # Non-browser routes are not origin-checked.
            assert (await c.get("/healthz", headers=headers)).status_code == 200


async def test_approvals_continue_the_turn_over_http(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    from collections.abc import Mapping
    from typing import Any

    from drupe.agent.models.script import Text, ToolCall
    from drupe.agent.models.scripted import register_script
    from drupe.tools.base import ToolContext, ToolEntry

    async def remove(arguments: Mapping[str, Any], context: ToolContext) -> str:
        return f"removed {arguments.get('path')}"

    register_script(
        "gw-approve-rm",
        [[ToolCall("rm", {"path": "/tmp/x"}, tool_call_id="call-1")], [Text("All clean.")]],
    )
    runtime.tools.register(
        ToolEntry(
            name="rm",
            description="Remove a file",
            input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
            execute=remove,
            needs_approval=lambda args: True,
        )
    )
    r = await client.post(
        "/api/chat", json=chat_body("c-approve", "clean up", models=["scripted:gw-approve-rm"])
    )
    chunks = [e.json for e in parse_events(r.text)[:-1]]
    request = next(c for c in chunks if c["type"] == "tool-approval-request")
    assert (await client.get("/api/status")).json()["conversations"]["c-approve"] == (
        "awaiting-approval"
    )
    wrong = await client.post(
        "/api/chat/c-approve/approvals",
        json={"decisions": [{"approvalId": "nope", "approved": True}]},
    )
    assert wrong.status_code == 422 and "nope" in wrong.json()["detail"]
    r = await client.post(
        "/api/chat/c-approve/approvals",
        json={"decisions": [{"approvalId": request["approvalId"], "approved": True}]},
    )
    assert r.status_code == 200
    outcome = r.json()
    assert outcome["ok"] is True and outcome["continued"] is True
    await runtime.manager.wait_settled("c-approve")
    detail = (await client.get("/api/conversations/c-approve")).json()
    answer = detail["messages"][-1]
    tool = next(p for p in answer["parts"] if p["type"] == "tool-rm")
    assert tool["state"] == "output-available" and tool["output"] == "removed /tmp/x"
    assert "All clean." in "".join(p.get("text", "") for p in answer["parts"])
