"""``GET /api/conversations/{id}/export``: Markdown of the shown branch, JSON of the whole tree."""

from __future__ import annotations

import httpx

from drupe.api.export_routes import current_path, filename_for, to_markdown
from tests.gateway.sse import chat_body


def test_markdown_follows_the_latest_branch() -> None:
    messages = [
        {"id": "u1", "parentId": None, "role": "user", "parts": [{"type": "text", "text": "hi"}]},
        {"id": "a1", "parentId": "u1", "role": "assistant", "modelId": "m-old", "parts": []},
        {"id": "a2", "parentId": "u1", "role": "assistant", "modelId": "m-new", "parts": [
            {"type": "reasoning", "text": "hidden"},
            {"type": "text", "text": "hello **there**"},
            {"type": "tool-search", "toolCallId": "t1"},
            {"type": "file", "filename": "a.png", "mediaType": "image/png", "url": "data:,"},
        ]},
    ]  # fmt: skip
    assert [m["id"] for m in current_path(messages)] == ["u1", "a2"]
    assert to_markdown("Greeting", messages) == (
        "# Greeting\n\n## You\n\nhi\n\n## m-new\n\n"
        "hello **there**\n\n[tool: search]\n\n[file: a.png]\n"
    )
    assert to_markdown(None, []) == "# Untitled\n"
    assert filename_for("Plan: Q3 / budget!", "c1", "md") == "Plan-Q3-budget.md"
    assert filename_for("日本", "c1", "json") == "c1.json"


async def test_export_both_formats(client: httpx.AsyncClient) -> None:
    cid = (await client.post("/api/conversations", json={"title": "Export me"})).json()["id"]
    assert (await client.post("/api/chat", json=chat_body(cid, "ping pong"))).status_code == 200

    md = await client.get(f"/api/conversations/{cid}/export")
    assert md.status_code == 200
    assert md.headers["content-type"].startswith("text/markdown")
    assert md.headers["content-disposition"] == 'attachment; filename="Export-me.md"'
    assert md.text == (
        "# Export me\n\n## You\n\nping pong\n\n## scripted:echo\n\nYou said: ping pong\n"
    )

    js = await client.get(f"/api/conversations/{cid}/export", params={"format": "json"})
    assert js.status_code == 200 and js.headers["content-type"] == "application/json"
    document = js.json()
    detail = (await client.get(f"/api/conversations/{cid}")).json()
    assert document["messages"] == detail["messages"]
    assert document["title"] == "Export me" and "exportedAt" in document


async def test_export_refuses_bad_input(client: httpx.AsyncClient) -> None:
    assert (await client.get("/api/conversations/nope/export")).status_code == 404
    cid = (await client.post("/api/conversations", json={})).json()["id"]
    bad = await client.get(f"/api/conversations/{cid}/export", params={"format": "pdf"})
    assert bad.status_code == 422 and "format" in bad.text
