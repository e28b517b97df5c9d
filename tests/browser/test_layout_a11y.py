"""Layout and accessibility in a real browser, at 1280x800 and at a phone's 390x844.

* axe-core (injected from ``tests/node/node_modules/axe-core``, pinned by
  ``tests/node/package-lock.json``; ``scripts/test`` runs ``npm ci`` there) finds no serious or
  critical violation on any page: home, a conversation, a multi-model conversation, an agent's
  session, the scheduled tasks (a task with a finished run), usage, a trace, channels. Each page
  is saved to ``docs/ui/<page>-<width>.png``. The same pages pass in dark mode, and home with
  the agent form open. (The settings pages: ``test_settings_ui``; the signed-in pages, the
  sign-in page and the share dialog: ``test_share_agent_ui``, ``test_sign_in_ui``.)
* Under 768 px the sidebar is hidden behind the ☰ button, opens over the page and closes when
  a link is followed; multi-model columns scroll sideways instead of running off screen.
* The keyboard: Enter sends, Shift+Enter adds a line, Escape stops a running answer.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import WAIT_MS, Drupe
from tests.browser.test_chat_ui import open_conversation, prompt, wait_finished

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / "tests" / "node" / "node_modules" / "axe-core" / "axe.min.js"
SHOTS = ROOT / "docs" / "ui"
VIEWPORTS = {"1280": {"width": 1280, "height": 800}, "390": {"width": 390, "height": 844}}
MODELS = ["scripted:echo?rate=200", "scripted:echo?rate=150"]


def serious_violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it is now."""
    if not AXE.exists():
        raise RuntimeError(f"{AXE} is missing: run `npm ci` in tests/node (scripts/test does)")
    page.add_script_tag(path=str(AXE))
    result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [
        {"id": v["id"], "help": v["help"], "nodes": [n["target"] for n in v["nodes"]][:5]}
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]


@pytest.fixture(scope="module")
def conversations(drupe_server: Drupe) -> dict[str, str]:
    """One finished single-model and one finished multi-model conversation."""
    single = drupe_server.create_conversation("Layout check")
    multi = drupe_server.create_conversation("Two models")
    for cid, models, text in (
        (single, None, "Show me **markdown** and `code`."),
        (multi, MODELS, prompt("col", 40)),
    ):
        body: dict[str, Any] = {
            "id": cid,
            "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": text}]}],
        }
        if models:
            body["models"] = models
        drupe_server.api.post("/api/chat", json=body).raise_for_status()
    return {"single": single, "multi": multi, "session": _session_with_a_task_run(drupe_server)}


def _session_with_a_task_run(drupe_server: Drupe) -> str:
    """An agent, a session of it with one answer, and a scheduled task of it with a finished
    run (the schedules page lists the run); the session's conversation id."""
    api = drupe_server.api
    agent = api.post("/api/agents", json={"name": "Layout agent", "modelId": "scripted:echo"})
    agent.raise_for_status()
    agent_id = agent.json()["id"]
    session = api.post(f"/api/agents/{agent_id}/sessions", json={"title": "Release notes"})
    session.raise_for_status()
    conversation_id = str(session.json()["conversationId"])
    parts = [{"type": "text", "text": "Draft the release notes."}]
    api.post(
        "/api/chat",
        json={"id": conversation_id, "messages": [{"id": "s1", "role": "user", "parts": parts}]},
    ).raise_for_status()
    trigger = {"kind": "cron", "expr": "0 9 * * 1-5", "timezone": "UTC"}
    task = api.post(
        "/api/schedules",
        json={
            "agentId": agent_id,
            "name": "Weekday digest",
            "prompt": "digest",
            "trigger": trigger,
        },
    )
    task.raise_for_status()
    runs_url = f"/api/schedules/{task.json()['id']}/runs"
    api.post(f"/api/schedules/{task.json()['id']}/run").raise_for_status()
    deadline = time.monotonic() + WAIT_MS / 1000
    while time.monotonic() < deadline:
        runs = api.get(runs_url).json()["items"]
        if runs and runs[0].get("finishedAt"):
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the task's run did not finish: {api.get(runs_url).text}")
    return conversation_id


PAGES = {
    "home": ("#/", "section.chat.home"),
    "conversation": ("#/c/{single}", "section.chat .message.assistant"),
    "multi-model": ("#/c/{multi}", '[data-testid="multi-model-columns"]'),
    "agent-session": ("#/c/{session}", '[data-testid="session-pane"] .message.assistant'),
    "schedules": ("#/schedules", '[data-testid="run-row"]'),
    "usage": ("#/usage", "main"),
    "trace": ("#/trace/{single}", ".trace"),
    "channels": ("#/channels", "main"),
}


@pytest.mark.parametrize("width", list(VIEWPORTS))
@pytest.mark.parametrize("name", list(PAGES))
def test_every_page_has_no_serious_axe_violation(
    drupe_server: Drupe,
    browser: Browser,
    conversations: dict[str, str],
    name: str,
    width: str,
) -> None:
    context = browser.new_context(viewport=VIEWPORTS[width])  # type: ignore[arg-type]
    context.set_default_timeout(WAIT_MS)
    try:
        page = context.new_page()
        hash_, ready = PAGES[name]
        page.goto(drupe_server.url + "/" + hash_.format(**conversations))
        expect(page.locator(ready).first).to_be_visible()
        page.wait_for_load_state("networkidle")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{name}-{width}.png"))
        assert serious_violations(page) == []
    finally:
        context.close()


@pytest.mark.parametrize("name", list(PAGES))
def test_dark_mode_has_no_serious_axe_violation(
    drupe_server: Drupe, browser: Browser, conversations: dict[str, str], name: str
) -> None:
    """The same pages with the system in dark mode (contrast is checked per colour scheme)."""
    context = browser.new_context(viewport=VIEWPORTS["1280"], color_scheme="dark")  # type: ignore[arg-type]
    context.set_default_timeout(WAIT_MS)
    try:
        page = context.new_page()
        hash_, ready = PAGES[name]
        page.goto(drupe_server.url + "/" + hash_.format(**conversations))
        expect(page.locator(ready).first).to_be_visible()
        page.wait_for_load_state("networkidle")
        assert serious_violations(page) == []
    finally:
        context.close()


def test_the_open_agent_form_has_no_serious_axe_violation(drupe_server: Drupe, page: Page) -> None:
    page.goto(drupe_server.url + "/#/")
    page.get_by_test_id("new-agent").click()
    expect(page.get_by_test_id("agent-form")).to_be_visible()
    expect(page.get_by_label("Driver")).to_be_visible()
    assert serious_violations(page) == []


def test_phone_sidebar_collapses_and_columns_scroll_sideways(
    drupe_server: Drupe, browser: Browser, conversations: dict[str, str]
) -> None:
    context = browser.new_context(viewport=VIEWPORTS["390"])  # type: ignore[arg-type]
    context.set_default_timeout(WAIT_MS)
    try:
        page = context.new_page()
        page.goto(drupe_server.url + "/#/")
        sidebar = page.locator("aside.sidebar")
        toggle = page.get_by_test_id("nav-toggle")
        expect(sidebar).to_be_hidden()
        expect(toggle).to_have_attribute("aria-expanded", "false")
        toggle.click()
        expect(sidebar).to_be_visible()
        expect(toggle).to_have_attribute("aria-expanded", "true")
        page.screenshot(path=str(SHOTS / "sidebar-open-390.png"))
        sidebar.locator(
            f'[data-conversation-id="{conversations["multi"]}"] a.conversation-link'
        ).click()
        expect(sidebar).to_be_hidden()

        columns = page.get_by_test_id("multi-model-columns")
        expect(columns).to_be_visible()
        sizes = columns.evaluate("el => [el.scrollWidth, el.clientWidth]")
        assert sizes[0] > sizes[1]  # wider than the screen: it scrolls
        second = columns.locator(".column").nth(1)
        expect(second).not_to_be_in_viewport(ratio=0.9)
        second.scroll_into_view_if_needed()
        expect(second).to_be_in_viewport(ratio=0.9)
        # the body itself never scrolls sideways
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
    finally:
        context.close()


def test_keyboard_enter_shift_enter_and_escape(drupe_server: Drupe, page: Page) -> None:
    conversation_id = drupe_server.create_conversation("keys")
    open_conversation(page, drupe_server, conversation_id)
    composer = page.get_by_test_id("composer-input")
    composer.click()
    composer.press_sequentially("first line")
    composer.press("Shift+Enter")
    composer.press_sequentially("second line")
    expect(composer).to_have_value("first line\nsecond line")
    composer.press("Enter")
    wait_finished(page)
    stored = drupe_server.conversation(conversation_id)["messages"]
    assert stored[0]["parts"][0]["text"] == "first line\nsecond line"

    composer.fill(prompt("long", 300))
    composer.press("Enter")
    badge = page.locator(".chat-head").get_by_test_id("status-badge")
    expect(badge).to_have_attribute("data-status", "streaming")
    composer.press("Escape")
    expect(badge).to_have_attribute("data-status", "aborted")
