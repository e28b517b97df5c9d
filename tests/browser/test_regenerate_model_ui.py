"""Regenerate with a model choice in a real browser: the ▾ menu beside "Regenerate" lists the
models the server can run now, and picking one answers the last user message again with that
model, as a new sibling of the old answer (both stay, the 2/2 navigation between them).

The browser server's default model is the paced ``scripted:echo?rate=15``; the menu offers
``scripted:echo`` (unpaced), so the stored rows tell which model answered each time.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import RATE, Drupe
from tests.browser.test_chat_ui import assistant, open_conversation, send, wait_finished

pytestmark = pytest.mark.browser

DEFAULT = f"scripted:echo?rate={RATE}"
CHOSEN = "scripted:echo"


def test_regenerate_with_a_chosen_model(drupe_server: Drupe, page: Page) -> None:
    catalogue = drupe_server.api.get("/api/models").json()
    listed = catalogue["models"]
    # the UI lists the default model first when the catalogue does not (a configured id)
    assert catalogue["default"] == DEFAULT and DEFAULT not in [m["id"] for m in listed]
    available = [DEFAULT, *(m["id"] for m in listed if m["available"])]
    assert CHOSEN in available
    conversation_id = drupe_server.create_conversation("regenerate with")
    open_conversation(page, drupe_server, conversation_id)
    send(page, "answer me twice")
    wait_finished(page)

    menu = page.get_by_test_id("regenerate-menu")
    menu.locator("summary").click()
    options = menu.get_by_test_id("regenerate-model-option")
    expect(options).to_have_count(len(available))
    assert options.evaluate_all("els => els.map(e => e.dataset.modelId)") == available
    menu.locator(f'[data-model-id="{CHOSEN}"]').click()

    answer = assistant(page)
    expect(answer.get_by_test_id("branch-position")).to_have_text("2/2")
    expect(answer).to_have_attribute("data-status", "success")
    expect(answer).to_contain_text("You said: answer me twice")
    label = next(m["label"] for m in listed if m["id"] == CHOSEN)
    expect(answer.locator(".message-model")).to_contain_text(label)

    rows = drupe_server.conversation(conversation_id)["messages"]
    user, first, second = rows
    assert first["parentId"] == second["parentId"] == user["id"]
    assert (first["modelId"], second["modelId"]) == (DEFAULT, CHOSEN)
    assert second["status"] == "success"

    # the old answer is one click away, with its own model
    answer.get_by_test_id("branch-prev").click()
    expect(answer.get_by_test_id("branch-position")).to_have_text("1/2")
    expect(answer).to_have_attribute("data-message-id", first["id"])
