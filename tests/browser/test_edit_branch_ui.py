"""Edit and resend in a real browser: editing a user message sends it as a new branch (a
sibling of the edited message, same parent), the page shows the new branch and its answer, and
the old branch stays stored."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import Drupe
from tests.browser.test_chat_ui import (
    assistant,
    open_conversation,
    rendered_text,
    send,
    stored_text,
    wait_finished,
)

pytestmark = pytest.mark.browser


def test_edit_a_user_message_makes_a_branch(drupe_server: Drupe, page: Page) -> None:
    conversation_id = drupe_server.create_conversation("edit me")
    open_conversation(page, drupe_server, conversation_id)
    send(page, "first question")
    wait_finished(page, 0)
    send(page, "second question")
    wait_finished(page, 1)

    users = page.locator('[data-testid="message"][data-role="user"]')
    second = users.nth(1)
    second.get_by_test_id("edit-message").click()
    editor = second.get_by_test_id("edit-input")
    expect(editor).to_have_value("second question")
    editor.fill("second question, sharper")
    second.get_by_test_id("edit-send").click()

    expect(assistant(page, 1)).to_contain_text("You said: second question, sharper")
    expect(assistant(page, 1)).to_have_attribute("data-status", "success")
    expect(users).to_have_count(2)
    expect(users.nth(1)).to_contain_text("second question, sharper")
    assert rendered_text(assistant(page, 0)) == "You said: first question"

    rows = drupe_server.conversation(conversation_id)["messages"]
    assert len(rows) == 6
    u1, a1, u2, _a2, u3, a3 = rows
    assert u2["parentId"] == u3["parentId"] == a1["id"]
    assert stored_text(u3) == "second question, sharper" and a3["parentId"] == u3["id"]
    assert u1["parentId"] is None


def test_edit_the_first_message_makes_a_new_root(drupe_server: Drupe, page: Page) -> None:
    conversation_id = drupe_server.create_conversation("edit the first")
    open_conversation(page, drupe_server, conversation_id)
    send(page, "opening line")
    wait_finished(page, 0)
    send(page, "and more")
    wait_finished(page, 1)

    users = page.locator('[data-testid="message"][data-role="user"]')
    first = users.nth(0)
    first.get_by_test_id("edit-message").click()
    expect(first.get_by_test_id("edit-input")).to_have_value("opening line")
    first.get_by_test_id("edit-input").fill("a better opening")
    first.get_by_test_id("edit-send").click()

    # the new branch is shown: one exchange, the edited message first, 2/2 between the roots
    expect(users).to_have_count(1)
    expect(assistant(page, 0)).to_contain_text("You said: a better opening")
    expect(assistant(page, 0)).to_have_attribute("data-status", "success")
    expect(users.nth(0).get_by_test_id("branch-position")).to_have_text("2/2")

    rows = drupe_server.conversation(conversation_id)["messages"]
    assert len(rows) == 6
    u1, _a1, _u2, _a2, u3, a3 = rows
    assert u1["parentId"] is None and u3["parentId"] is None  # two roots, siblings
    assert stored_text(u3) == "a better opening" and a3["parentId"] == u3["id"]

    # the old branch, whole, is one click away
    users.nth(0).get_by_test_id("branch-prev").click()
    expect(users).to_have_count(2)
    expect(users.nth(0)).to_contain_text("opening line")
    expect(assistant(page, 1)).to_contain_text("You said: and more")


def test_sibling_navigation_is_kept_on_the_server(drupe_server: Drupe, page: Page) -> None:
    conversation_id = drupe_server.create_conversation("siblings")
    open_conversation(page, drupe_server, conversation_id)
    send(page, "root question")
    wait_finished(page, 0)
    send(page, "version one")
    wait_finished(page, 1)
    users = page.locator('[data-testid="message"][data-role="user"]')
    users.nth(1).get_by_test_id("edit-message").click()
    users.nth(1).get_by_test_id("edit-input").fill("version two")
    users.nth(1).get_by_test_id("edit-send").click()
    expect(assistant(page, 1)).to_contain_text("You said: version two")
    expect(assistant(page, 1)).to_have_attribute("data-status", "success")

    position = users.nth(1).get_by_test_id("branch-position")
    expect(position).to_have_text("2/2")
    users.nth(1).get_by_test_id("branch-prev").click()
    expect(position).to_have_text("1/2")
    expect(users.nth(1)).to_contain_text("version one")
    expect(assistant(page, 1)).to_contain_text("You said: version one")

    # kept on the server: a reload (or another tab) shows the same branch
    page.reload()
    expect(users.nth(1).get_by_test_id("branch-position")).to_have_text("1/2")
    expect(assistant(page, 1)).to_contain_text("You said: version one")

    # a message sent now continues the shown branch, not the newest message
    send(page, "follow up")
    expect(assistant(page, 2)).to_have_attribute("data-status", "success")
    rows = drupe_server.conversation(conversation_id)["messages"]
    by_text = {stored_text(r): r for r in rows}
    assert by_text["follow up"]["parentId"] == by_text["You said: version one"]["id"]
    expect(users.nth(1)).to_contain_text("version one")
