"""Titles and search in a real browser: a conversation is titled from its first message in every
open tab, and a search hit opens the conversation scrolled to the matching message.

The server is the package's real ``drupe`` (see ``conftest``) with the paced ``scripted:echo``
model, so the titler takes the first words (no model call). Waits are Playwright's DOM waits.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import BrowserContext, expect

from tests.browser.conftest import Drupe
from tests.browser.test_chat_ui import open_conversation, send, wait_finished

pytestmark = pytest.mark.browser


def test_first_message_titles_the_conversation_in_every_tab(
    drupe_server: Drupe, context: BrowserContext
) -> None:
    conversation_id = drupe_server.create_conversation()
    writer, watcher = context.new_page(), context.new_page()
    open_conversation(writer, drupe_server, conversation_id)
    watcher.goto(drupe_server.url + "/#/")
    item = watcher.locator(
        f'[data-testid="conversation-item"][data-conversation-id="{conversation_id}"]'
    )
    expect(item).to_contain_text("Untitled")

    send(writer, "Quarterly budget review for the zebra project")
    wait_finished(writer)

    title = "Quarterly budget review for the zebra project"
    expect(writer.locator(".chat-title")).to_have_text(title)
    watcher.bring_to_front()
    expect(item).to_contain_text(title)
    assert drupe_server.conversation(conversation_id)["title"] == title


def test_a_search_hit_opens_the_conversation_at_the_message(
    drupe_server: Drupe, context: BrowserContext
) -> None:
    conversation_id = drupe_server.create_conversation("long talk")
    page = context.new_page()
    open_conversation(page, drupe_server, conversation_id)
    # Enough exchanges that the first one is scrolled out of view at the end.
    send(page, "the okapi lives in the rainforest")
    wait_finished(page)
    for index in range(1, 5):
        send(page, f"filler {index} " + "words " * 60)
        wait_finished(page, index)
    stored = drupe_server.conversation(conversation_id)["messages"]
    target = next(m for m in stored if m["role"] == "user" and "okapi" in m["parts"][0]["text"])

    page.goto(drupe_server.url + "/#/")
    page.get_by_test_id("search-input").fill("okap rainfor")
    hit = page.locator(f'[data-testid="search-hit"][data-message-id="{target["id"]}"]')
    expect(hit).to_contain_text("long talk")
    expect(hit.locator("mark").first).to_have_text("okapi")
    hit.click()

    expect(page).to_have_url(re.compile(rf"#/c/{conversation_id}\?m={target['id']}$"))
    found = page.locator(f'[data-message-id="{target["id"]}"]')
    expect(found).to_have_class(re.compile(r"\bfound\b"))
    expect(found).to_be_in_viewport()
    # the search box was cleared by following the hit
    expect(page.get_by_test_id("search-results")).to_have_count(0)


def test_search_with_no_match_says_so(drupe_server: Drupe, context: BrowserContext) -> None:
    page = context.new_page()
    page.goto(drupe_server.url + "/#/")
    page.get_by_test_id("search-input").fill("xylophonequartz")
    expect(page.get_by_test_id("search-results")).to_contain_text("No matches.")
