"""The agents UI in a real browser: create an agent, chat in its session, answer an approval.

Same fixtures as ``test_chat_ui`` (a real server in a thread, Debian's chromium). The agents use
the ``inprocess`` driver: the first one the server's default model (the paced ``scripted:echo``),
the second a scripted model registered in this process (the server runs in it) that asks to run
a shell command, which needs an approval. Waits are Playwright's DOM waits, never sleeps.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from drupe.agent.models.script import Text, ToolCall
from drupe.agent.models.scripted import register_script
from tests.browser.conftest import Drupe
from tests.browser.test_chat_ui import assistant, rendered_text, rows, send, stored_text

pytestmark = pytest.mark.browser


def test_create_an_agent_and_chat_in_its_session(drupe_server: Drupe, page: Page) -> None:
    page.goto(drupe_server.url)
    section = page.get_by_test_id("agents-section")
    expect(section).to_be_visible()
    section.get_by_test_id("new-agent").click()
    page.get_by_test_id("agent-name").fill("Echo agent")
    page.get_by_test_id("create-agent").click()

    # creating an agent opens its first session
    agent = section.get_by_test_id("agent-item").filter(has_text="Echo agent")
    expect(agent).to_contain_text("inprocess")
    session = agent.get_by_test_id("session-item")
    expect(session).to_have_count(1)
    expect(session).to_have_attribute("data-active", "true")
    conversation_id = session.get_attribute("data-conversation-id")
    assert conversation_id is not None and conversation_id.startswith("agent-session:")
    expect(page.get_by_test_id("session-bar")).to_contain_text("Echo agent")
    expect(page.get_by_test_id("compaction-status")).to_have_attribute("data-state", "idle")
    expect(page.get_by_test_id("strategy-picker")).to_be_hidden()
    # session conversations are listed under their agent, not among the conversations
    listed = f'[data-testid="conversation-item"][data-conversation-id="{conversation_id}"]'
    expect(page.locator(listed)).to_have_count(0)

    send(page, "hello agent")
    message = assistant(page)
    expect(message).to_have_attribute("data-status", "success")
    assert rendered_text(message) == "You said: hello agent"
    expect(page.get_by_test_id("regenerate-button")).to_have_count(0)  # sessions take new messages
    stored = rows(drupe_server, conversation_id)
    assert [(r["role"], r["status"]) for r in stored] == [
        ("user", "success"),
        ("assistant", "success"),
    ]
    assert stored_text(stored[1]) == "You said: hello agent"
    assert message.get_attribute("data-message-id") == stored[1]["id"]


def test_an_agent_approval_is_answered_in_place(
    drupe_server: Drupe, page: Page, tmp_path: Path
) -> None:
    register_script(
        "browser-agent-shell",
        [
            [ToolCall("shell", {"command": "echo approved > made.txt"}, "call-ui")],
            [Text("Done with the shell.")],
        ],
    )
    workspace = tmp_path / "ws"
    workspace.mkdir()
    agent = drupe_server.api.post(
        "/api/agents",
        json={
            "name": "Shell agent",
            "modelId": "scripted:browser-agent-shell",
            "workspace": str(workspace),
        },
    ).json()
    session = drupe_server.api.post(
        f"/api/agents/{agent['id']}/sessions",
        json={"title": "approvals", "settings": {"shell": True, "shell_timeout_s": 10}},
    ).json()
    page.goto(drupe_server.page_url(session["conversationId"]))
    expect(page.get_by_test_id("session-bar")).to_contain_text("Shell agent")

    send(page, "run it")
    tool = page.get_by_test_id("tool-part")
    expect(tool).to_have_attribute("data-state", "approval-requested")
    expect(page.get_by_test_id("pending-approvals")).to_be_visible()
    assert not (workspace / "made.txt").exists()
    tool.get_by_test_id("approve-button").click()

    expect(tool).to_have_attribute("data-state", "output-available")
    expect(assistant(page)).to_contain_text("Done with the shell.")
    expect(page.get_by_test_id("pending-approvals")).to_have_count(0)
    assert (workspace / "made.txt").read_text() == "approved\n"
    stored = rows(drupe_server, session["conversationId"])
    assert stored[-1]["status"] == "success"
    assert stored_text(stored[-1]).endswith("Done with the shell.")
