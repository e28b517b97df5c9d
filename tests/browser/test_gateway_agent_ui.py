"""An agent-session turn driven through the gateway (``/v1/chat/completions`` with the model
``agent-session:<id>``, the official ``openai`` client) shows live in a browser tab: it is the
session's ordinary turn, in the same conversation stream. Waits are Playwright's DOM waits."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import openai
import pytest
from playwright.sync_api import Page, expect

from drupe.persistence.db import open_database
from tests.browser.conftest import Drupe
from tests.browser.test_chat_ui import assistant, rendered_text, rows, stored_text

pytestmark = pytest.mark.browser

LIVE = re.compile(r"^(pending|streaming)$")


def gateway_key(drupe: Drupe) -> str:
    async def create() -> str:
        async with open_database(data_dir=drupe.data_dir) as db:
            key, _ = await db.api_keys.create("browser gateway test")
            return key

    # Playwright's sync API keeps an event loop running in this thread: use another one.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, create).result()


def test_a_turn_driven_through_the_gateway_shows_live_in_a_tab(
    drupe_server: Drupe, page: Page, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    agent = drupe_server.api.post(
        "/api/agents",
        json={
            "name": "Gateway agent",
            "modelId": "scripted:lorem?words=40&rate=15",  # about 3 s of streaming
            "workspace": str(workspace),
        },
    ).json()
    session = drupe_server.api.post(f"/api/agents/{agent['id']}/sessions", json={}).json()
    client = openai.OpenAI(
        base_url=f"{drupe_server.url}/v1", api_key=gateway_key(drupe_server), max_retries=0
    )
    stream = client.chat.completions.create(
        model=f"agent-session:{session['id']}",
        messages=[{"role": "user", "content": "tell me something long"}],
        stream=True,
    )
    received: list[str] = []
    chunks = iter(stream)
    for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta.content:
            received.append(chunk.choices[0].delta.content)
            break  # the turn is live: open the session in a tab

    page.goto(drupe_server.page_url(session["conversationId"]))
    message = assistant(page)
    expect(message).to_have_attribute("data-status", LIVE)  # watched while it streams
    expect(message).to_have_attribute("data-status", "success")
    received += [c.choices[0].delta.content or "" for c in chunks if c.choices]
    stream.close()
    client.close()

    text = "".join(received)
    assert len(text.split()) == 40
    assert rendered_text(message) == text
    stored = rows(drupe_server, session["conversationId"])
    assert [(r["role"], r["status"]) for r in stored] == [
        ("user", "success"),
        ("assistant", "success"),
    ]
    assert stored_text(stored[1]) == text
    assert message.get_attribute("data-message-id") == stored[1]["id"]
