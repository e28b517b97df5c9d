"""The scheduled-tasks page and the trace timeline in a real browser (same fixtures as
``test_chat_ui``: a real server in a thread, Debian's chromium). Waits are Playwright's DOM
waits, never sleeps."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import Drupe
from tests.browser.test_chat_ui import open_conversation, send, wait_finished

pytestmark = pytest.mark.browser


def test_schedules_show_next_fire_and_history_with_run_now_pause_resume(
    drupe_server: Drupe, page: Page
) -> None:
    agent = drupe_server.api.post("/api/agents", json={"name": "Digest agent"}).json()
    page.goto(f"{drupe_server.url}/#/")
    page.get_by_test_id("schedules-link").click()
    expect(page.get_by_test_id("schedules-page")).to_be_visible()
    page.get_by_test_id("schedule-agent").select_option(agent["id"])
    page.get_by_test_id("schedule-name").fill("Morning digest")
    page.get_by_test_id("schedule-prompt").fill("digest please")
    page.get_by_test_id("schedule-cron").fill("0 9 * * *")
    page.get_by_test_id("schedule-tz").fill("Europe/Berlin")
    page.get_by_test_id("create-schedule").click()

    item = page.get_by_test_id("schedule-item").filter(has_text="Morning digest")
    expect(item).to_contain_text("cron 0 9 * * * (Europe/Berlin)")
    stored = drupe_server.api.get("/api/schedules").json()["items"]
    [schedule] = [s for s in stored if s["name"] == "Morning digest"]
    assert schedule["nextRunAt"] is not None
    expect(item.get_by_test_id("next-run")).not_to_have_text("paused")
    expect(item.get_by_test_id("run-history-empty")).to_be_visible()

    item.get_by_test_id("run-now").click()
    row = item.get_by_test_id("run-row").first
    expect(row).to_have_attribute("data-status", "completed")
    expect(row).to_contain_text("You said: digest please")

    item.get_by_test_id("pause").click()
    expect(item).to_have_attribute("data-enabled", "false")
    expect(item.get_by_test_id("next-run")).to_have_text("paused")
    assert drupe_server.api.get(f"/api/schedules/{schedule['id']}").json()["enabled"] is False
    item.get_by_test_id("resume").click()
    expect(item).to_have_attribute("data-enabled", "true")
    expect(item.get_by_test_id("next-run")).not_to_have_text("paused")


def test_a_conversation_trace_shows_turns_and_steps_with_tokens(
    drupe_server: Drupe, page: Page
) -> None:
    conversation_id = drupe_server.create_conversation("traced")
    open_conversation(page, drupe_server, conversation_id)
    send(page, "trace me")
    wait_finished(page)
    page.get_by_test_id("trace-link").click()
    panel = page.get_by_test_id("trace-panel")
    expect(panel).to_be_visible()
    trace = drupe_server.api.get(f"/api/conversations/{conversation_id}/trace").json()
    expect(panel).to_have_attribute("data-trace-id", trace["traceId"])
    spans = panel.get_by_test_id("trace-span")
    turn = spans.filter(has_text="ai.turn")
    expect(turn).to_have_count(1)
    expect(turn).to_have_attribute("data-status", "OK")
    step = spans.filter(has_text="chat scripted:echo")
    expect(step).to_have_count(1)
    expect(step.get_by_test_id("span-tokens")).to_contain_text(" in / ")
    expect(step.get_by_test_id("span-duration")).not_to_be_empty()
