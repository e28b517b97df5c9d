"""The web UI in a real browser against a real server: tabs, tab close, reload, stop, steer.

Each test drives Debian's chromium (Playwright, sync API) on the built UI served by a real
``drupe`` server (see ``conftest``), and checks the rendered DOM against the stored tree read
back over REST (``GET /api/conversations/{id}``, which reads the database). The model is the
paced ``scripted:echo``: the answer to a prompt is ``You said: <prompt>``, one word per delta,
so every answer is known in advance and still streaming while a test acts on it. Waits are
Playwright's explicit DOM waits (``expect``), never sleeps. The last test saves the main view
as ``docs/screenshot.png``.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Locator, Page, expect

from tests.browser.conftest import Drupe

pytestmark = pytest.mark.browser

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshot.png"
LIVE = re.compile(r"^(pending|streaming)$")


def prompt(tag: str, words: int) -> str:
    """``words`` distinct words (``tag01 tag02 ...``), so any prefix is recognisable."""
    return " ".join(f"{tag}{i:02d}" for i in range(1, words + 1))


def echoed(text: str) -> str:
    return f"You said: {text}"


def assistant(page: Page, index: int = 0) -> Locator:
    return page.locator('[data-testid="message"][data-role="assistant"]').nth(index)


def rendered_text(message: Locator) -> str:
    """The text the page shows for one message (its markdown blocks, or its plain text)."""
    blocks = message.locator(".markdown, .plain").all_inner_texts()
    return "\n".join(block.strip() for block in blocks)


def stored_text(row: dict[str, Any]) -> str:
    return "".join(p["text"] for p in row["parts"] if p.get("type") == "text")


def words(text: str) -> list[str]:
    return text.split()


def rows(drupe: Drupe, conversation_id: str) -> list[dict[str, Any]]:
    return list(drupe.conversation(conversation_id)["messages"])


def send(page: Page, text: str) -> None:
    # A background tab gets no animation frames, which Playwright's click waits for.
    page.bring_to_front()
    page.get_by_test_id("composer-input").fill(text)
    page.get_by_test_id("send-button").click()


def open_conversation(page: Page, drupe: Drupe, conversation_id: str) -> None:
    page.goto(drupe.page_url(conversation_id))
    expect(page.locator(f'section.chat[data-conversation-id="{conversation_id}"]')).to_be_visible()


def wait_finished(page: Page, index: int = 0) -> Locator:
    message = assistant(page, index)
    expect(message).to_have_attribute("data-status", "success")
    badge = page.locator(".chat-head").get_by_test_id("status-badge")
    expect(badge).to_have_attribute("data-status", "done")
    return message


def test_two_tabs_on_one_conversation_see_the_same_answer(
    drupe_server: Drupe, context: BrowserContext
) -> None:
    conversation_id = drupe_server.create_conversation("two tabs")
    first, second = context.new_page(), context.new_page()
    open_conversation(first, drupe_server, conversation_id)
    open_conversation(second, drupe_server, conversation_id)
    text = prompt("tab", 36)

    send(first, text)

    # The second tab, which sent nothing, follows the answer while it is being written.
    live = assistant(second)
    expect(live).to_have_attribute("data-status", LIVE)
    expect(live).to_contain_text("tab04")
    expect(live).to_have_attribute("data-status", LIVE)

    answers = [rendered_text(wait_finished(p)) for p in (first, second)]
    stored = rows(drupe_server, conversation_id)
    assert [r["role"] for r in stored] == ["user", "assistant"]
    assert stored[1]["status"] == "success"
    assert stored_text(stored[1]) == echoed(text)
    assert answers == [echoed(text), echoed(text)]


def test_closing_one_tab_does_not_stop_the_answer(
    drupe_server: Drupe, context: BrowserContext
) -> None:
    conversation_id = drupe_server.create_conversation("closed tab")
    sender, watcher = context.new_page(), context.new_page()
    open_conversation(sender, drupe_server, conversation_id)
    text = prompt("close", 50)
    send(sender, text)
    expect(assistant(sender)).to_contain_text("close03")

    open_conversation(watcher, drupe_server, conversation_id)
    expect(assistant(watcher)).to_contain_text("close06")
    sender.close()  # drops the sender's stream connection; that is never a stop

    expect(assistant(watcher)).to_have_attribute("data-status", LIVE)
    answer = rendered_text(wait_finished(watcher))
    stored = rows(drupe_server, conversation_id)
    assert [r["role"] for r in stored] == ["user", "assistant"]
    assert stored[1]["status"] == "success"
    assert stored_text(stored[1]) == echoed(text)
    assert answer == echoed(text)


def test_reload_mid_answer_resumes_without_loss_or_duplication(
    drupe_server: Drupe, page: Page
) -> None:
    conversation_id = drupe_server.create_conversation("reload")
    open_conversation(page, drupe_server, conversation_id)
    text = prompt("reload", 40)
    send(page, text)
    expect(assistant(page)).to_contain_text("reload05")

    page.reload()

    message = assistant(page)
    expect(message).to_contain_text("reload10")
    partial = rendered_text(message)
    assert echoed(text).startswith(partial), partial  # resumed mid-way: a prefix, no repeats
    answer = rendered_text(wait_finished(page))
    stored = rows(drupe_server, conversation_id)
    assert [r["role"] for r in stored] == ["user", "assistant"]
    assert stored[1]["status"] == "success"
    assert stored_text(stored[1]) == echoed(text)
    assert answer == stored_text(stored[1])
    assert answer.count("reload05") == 1


def test_stop_persists_the_partial_answer(drupe_server: Drupe, page: Page) -> None:
    conversation_id = drupe_server.create_conversation("stop")
    open_conversation(page, drupe_server, conversation_id)
    text = prompt("stop", 60)
    send(page, text)
    expect(assistant(page)).to_contain_text("stop04")

    page.get_by_test_id("stop-button").click()

    message = assistant(page)
    expect(message).to_have_attribute("data-status", "paused")
    expect(page.get_by_test_id("stop-button")).to_have_count(0)
    badge = page.locator(".chat-head").get_by_test_id("status-badge")
    expect(badge).not_to_have_attribute("data-status", LIVE)
    assert not LIVE.match(drupe_server.conversation(conversation_id)["status"])
    stored = rows(drupe_server, conversation_id)
    assert [r["role"] for r in stored] == ["user", "assistant"]
    assert stored[1]["status"] == "paused"
    partial = stored_text(stored[1])
    assert "stop04" in partial
    assert echoed(text).startswith(partial)
    assert len(partial) < len(echoed(text))
    assert rendered_text(message) == partial.strip()


def test_a_steer_typed_mid_answer_is_answered_after_the_running_turn(
    drupe_server: Drupe, page: Page
) -> None:
    conversation_id = drupe_server.create_conversation("steer")
    open_conversation(page, drupe_server, conversation_id)
    first = prompt("first", 36)
    send(page, first)
    expect(assistant(page)).to_contain_text("first04")

    steer = "and then say steer01 steer02 steer03"
    send(page, steer)  # the composer is busy: this posts a steer (strategy "enqueue")
    expect(page.get_by_test_id("queued-steer")).to_contain_text(steer)

    expect(page.get_by_test_id("message")).to_have_count(4)
    wait_finished(page, 1)
    expect(page.get_by_test_id("queued-steer")).to_have_count(0)
    shown = page.get_by_test_id("message")
    assert [m.get_attribute("data-role") for m in shown.all()] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    texts = [rendered_text(m) for m in shown.all()]
    assert texts[:3] == [first, echoed(first), steer]
    # The model is told the steer arrived while it worked; the echo shows what it was told.
    assert texts[3].startswith("You said:")
    assert steer in texts[3]

    stored = rows(drupe_server, conversation_id)
    assert [(r["role"], r["status"]) for r in stored] == [
        ("user", "success"),
        ("assistant", "success"),
        ("user", "success"),
        ("assistant", "success"),
    ]
    assert [stored_text(r) for r in stored[:3]] == [first, echoed(first), steer]
    assert words(stored_text(stored[3])) == words(texts[3])
    assert [r["parentId"] for r in stored] == [None] + [r["id"] for r in stored[:-1]]


def test_main_view_screenshot(drupe_server: Drupe, page: Page) -> None:
    conversation_id = drupe_server.create_conversation("A tour of Drupe")
    open_conversation(page, drupe_server, conversation_id)
    text = (
        "Drupe keeps the answer on the server, so you can:\n\n"
        "- reload the page mid-answer,\n"
        "- open a **second tab**,\n"
        "- steer or stop it while it streams."
    )
    send(page, text)
    wait_finished(page)
    expect(page.get_by_test_id("conversation-item").first).to_be_visible()

    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT))

    header = SCREENSHOT.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", header[16:24]) == (1280, 800)
