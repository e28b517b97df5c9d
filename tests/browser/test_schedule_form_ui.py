"""The Scheduled tasks form in a real browser: every CLI option, a bad cron refused with a
message under its field (nothing saved), edit (PATCH) and delete, checked against the REST
answers of the real server."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import Drupe

pytestmark = pytest.mark.browser


def stored(drupe: Drupe, name: str) -> list[dict[str, object]]:
    items = drupe.api.get("/api/schedules").json()["items"]
    return [s for s in items if s["name"] == name]


def test_create_with_options_validate_edit_and_delete(drupe_server: Drupe, page: Page) -> None:
    agent = drupe_server.api.post("/api/agents", json={"name": "Form agent"}).json()
    page.goto(f"{drupe_server.url}/#/schedules")
    form = page.get_by_test_id("schedule-form")
    form.get_by_test_id("schedule-agent").select_option(agent["id"])
    form.get_by_label("Name").fill("Weekly report")
    form.get_by_label("Prompt").fill("write the report")
    form.get_by_label("Cron expression").fill("61 * * * *")
    form.get_by_label("Timeout (minutes, 0: none)").fill("7")
    form.get_by_label("Session").select_option("sticky")
    form.get_by_label("Missed runs").select_option("run-once")
    form.get_by_test_id("create-schedule").click()

    error = form.get_by_test_id("error-expr")
    expect(error).to_contain_text("cron")
    expect(form.get_by_label("Cron expression")).to_have_attribute("aria-invalid", "true")
    assert stored(drupe_server, "Weekly report") == []  # nothing half-saved

    form.get_by_label("Cron expression").fill("0 8 * * 1")
    form.get_by_label("Time zone").fill("UTC")
    form.get_by_test_id("create-schedule").click()
    item = page.get_by_test_id("schedule-item").filter(has_text="Weekly report")
    expect(item).to_contain_text("cron 0 8 * * 1 (UTC)")
    expect(form.get_by_test_id("error-expr")).to_have_count(0)
    [created] = stored(drupe_server, "Weekly report")
    assert (created["timeoutMinutes"], created["sessionMode"], created["missedPolicy"]) == (
        7,
        "sticky",
        "run-once",
    )

    item.get_by_test_id("edit").click()
    edit = item.get_by_test_id("schedule-edit-form")
    expect(edit.get_by_label("Name")).to_have_value("Weekly report")
    edit.get_by_label("Repeat").select_option("interval")
    edit.get_by_label("Minutes between runs").fill("90")
    edit.get_by_label("Timeout (minutes, 0: none)").fill("0")
    edit.get_by_test_id("save-schedule").click()
    expect(edit).to_have_count(0)
    expect(item).to_contain_text("every")
    [edited] = stored(drupe_server, "Weekly report")
    assert edited["trigger"]["seconds"] == 90 * 60  # type: ignore[index]
    assert edited["timeoutMinutes"] == 0 and edited["id"] == created["id"]

    item.get_by_test_id("delete").click()
    item.get_by_test_id("confirm-delete").click()
    expect(page.get_by_test_id("schedule-item").filter(has_text="Weekly report")).to_have_count(0)
    assert stored(drupe_server, "Weekly report") == []
