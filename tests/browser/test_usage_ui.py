"""The usage page and the first-run notice in a real browser against a real server.

The usage page (``#/usage``) plots what ``GET /api/usage`` reports; the test makes answers of
its own (a model id no other test uses), then reads the page's bars and compares them with the
usage stored on each answer (``GET /api/conversations/{id}``). The last test saves the page as
``docs/usage.png``. The first-run notice is checked in a fresh browser context (empty storage).
"""

from __future__ import annotations

import struct
from datetime import UTC, datetime
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import Drupe

pytestmark = pytest.mark.browser

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "usage.png"
MODEL = "scripted:lorem?words=9&rate=500"


def answer_in(drupe: Drupe, conversation_id: str, text: str, model: str = MODEL) -> None:
    body = {
        "id": conversation_id,
        "messages": [{"role": "user", "parts": [{"type": "text", "text": text}]}],
        "trigger": "submit-message",
        "models": [model],
    }
    response = drupe.api.post("/api/chat", json=body)
    assert response.status_code == 200 and response.text.rstrip().endswith("data: [DONE]")


def stored_total_tokens(drupe: Drupe, conversation_id: str) -> int:
    usages = [
        m["metadata"]["usage"]
        for m in drupe.conversation(conversation_id)["messages"]
        if m["role"] == "assistant"
    ]
    return sum(u["inputTokens"] + u["outputTokens"] for u in usages)


def test_usage_page_plots_tokens_and_answers_per_day_model_and_conversation(
    drupe_server: Drupe, page: Page
) -> None:
    big = drupe_server.create_conversation("Usage: three answers")
    small = drupe_server.create_conversation("Usage: one answer")
    for n in range(3):
        answer_in(drupe_server, big, f"question {n}")
    answer_in(drupe_server, small, "only question")

    page.goto(f"{drupe_server.url}/#/")
    page.get_by_test_id("usage-link").click()
    expect(page.get_by_test_id("usage-page")).to_be_visible()

    model_row = page.locator(f'[data-testid="usage-models-row"][data-key="{MODEL}"]')
    expect(model_row).to_contain_text("4 ans.")
    expected_model_tokens = stored_total_tokens(drupe_server, big) + stored_total_tokens(
        drupe_server, small
    )
    expect(model_row).to_have_attribute("data-value", str(expected_model_tokens))

    big_row = page.locator(f'[data-testid="usage-conversations-row"][data-key="{big}"]')
    small_row = page.locator(f'[data-testid="usage-conversations-row"][data-key="{small}"]')
    expect(big_row).to_contain_text("Usage: three answers")
    expect(big_row).to_contain_text("3 ans.")
    expect(big_row).to_have_attribute("data-value", str(stored_total_tokens(drupe_server, big)))
    expect(small_row).to_contain_text("1 ans.")

    # One bar per day of the 30-day window; today's (the last) counts at least these 4 answers.
    today = datetime.now(UTC).date().isoformat()
    bars = page.get_by_test_id("usage-answers-per-day-bar")
    expect(bars).to_have_count(30)
    assert bars.last.get_attribute("data-day") == today
    assert int(bars.last.get_attribute("data-total") or 0) >= 4
    token_bars = page.get_by_test_id("usage-tokens-per-day-bar")
    assert int(token_bars.last.get_attribute("data-total") or 0) >= expected_model_tokens

    # A conversation's bar links to it.
    big_row.get_by_role("link").click()
    expect(page.get_by_test_id("message").first).to_be_visible()
    assert page.url.endswith(f"#/c/{big}")

    page.get_by_test_id("usage-link").click()
    page.get_by_test_id("usage-window").select_option("7")
    expect(page.get_by_test_id("usage-answers-per-day-bar")).to_have_count(7)


def test_usage_page_screenshot(drupe_server: Drupe, page: Page) -> None:
    for n in range(2):
        answer_in(drupe_server, drupe_server.create_conversation(f"Notes {n}"), "a question")
    page.goto(f"{drupe_server.url}/#/usage")
    expect(page.get_by_test_id("usage-models-row").first).to_be_visible()
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT))
    header = SCREENSHOT.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", header[16:24]) == (1280, 800)


def test_first_run_notice_names_the_model_once_before_the_first_answer(
    drupe_server: Drupe, page: Page
) -> None:
    page.goto(f"{drupe_server.url}/#/")
    notice = page.get_by_test_id("first-run-notice")
    expect(notice).to_be_visible()
    default = drupe_server.api.get("/api/models").json()["default"]
    expect(notice.get_by_test_id("first-run-model")).to_have_text(default)
    expect(notice).to_contain_text("OPENAI_API_KEY")
    expect(notice).to_contain_text("drupe doctor")

    page.get_by_test_id("composer-input").fill("hello there")
    page.get_by_test_id("send-button").click()
    expect(page.locator('[data-testid="message"][data-role="assistant"]').first).to_be_visible()

    page.goto(f"{drupe_server.url}/#/")
    page.reload()
    expect(page.get_by_test_id("empty-state")).to_be_visible()
    expect(page.get_by_test_id("first-run-notice")).to_have_count(0)
