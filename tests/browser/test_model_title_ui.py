"""A title model names a conversation after its first answer, in every open tab.

A server of its own (``title_model = "scripted:lorem?words=3"``, which always answers "Lorem
ipsum dolor."): the first-words title ("okapis sleep standing up…") is set at once, then, after
the answer, the title model's "Lorem ipsum dolor" replaces it, in the tab that sent the message
(sidebar and header) and in a second tab that only shows the list.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import BrowserContext, expect

from tests.browser.conftest import DEFAULT_MODEL, Drupe, serve
from tests.browser.test_chat_ui import wait_finished

pytestmark = pytest.mark.browser

TITLE = "Lorem ipsum dolor"
PROMPT = "okapis sleep standing up in the forest, do they not"


@pytest.fixture(scope="module")
def titled_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Drupe]:
    config = f'default_model = "{DEFAULT_MODEL}"\ntitle_model = "scripted:lorem?words=3"\n'
    with serve(tmp_path_factory.mktemp("drupe-titles"), config) as drupe:
        yield drupe


def test_the_title_model_renames_the_conversation_in_every_tab(
    titled_server: Drupe, context: BrowserContext
) -> None:
    watcher = context.new_page()
    watcher.goto(titled_server.url)
    expect(watcher.get_by_test_id("composer-input")).to_be_visible()

    page = context.new_page()
    page.goto(titled_server.url)
    page.get_by_test_id("composer-input").fill(PROMPT)
    page.get_by_test_id("send-button").click()
    answer = wait_finished(page)
    expect(answer).to_contain_text(f"You said: {PROMPT}")

    expect(page.locator(".chat-title")).to_have_text(TITLE)
    item = page.get_by_test_id("conversation-item")
    expect(item).to_have_count(1)
    expect(item).to_contain_text(TITLE)
    conversation_id = item.get_attribute("data-conversation-id")
    assert conversation_id is not None
    assert titled_server.conversation(conversation_id)["title"] == TITLE

    watcher.bring_to_front()
    expect(watcher.get_by_test_id("conversation-item")).to_contain_text(TITLE)
