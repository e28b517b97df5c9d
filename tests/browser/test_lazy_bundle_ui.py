"""The UI's initial JavaScript stays small: KaTeX and highlight.js load only when a message
needs them.

The sizes are the served files' (``src/drupe/api/static/assets``), summed over the scripts the
browser fetched. The bound is independent of the build's hashes: the whole UI with KaTeX and
highlight.js was 1.13 MB of JavaScript; without them it is about 0.70 MB.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, Request, expect

from tests.browser.conftest import Drupe
from tests.browser.test_chat_ui import open_conversation, send, wait_finished
from tests.browser.test_message_actions_ui import PROMPT

pytestmark = pytest.mark.browser

ASSETS = Path(__file__).resolve().parents[2] / "src" / "drupe" / "api" / "static" / "assets"
INITIAL_JS_LIMIT = 800_000
"""Bytes of JavaScript a first page load may fetch (the eager bundle was 1,132,341)."""


def fetched_assets(page: Page) -> list[str]:
    names: list[str] = []

    def record(request: Request) -> None:
        if "/assets/" in request.url:
            names.append(request.url.rsplit("/", 1)[-1])

    page.on("request", record)
    return names


def lazy(names: list[str]) -> set[str]:
    return {n.split("-", 1)[0] for n in names if n.startswith(("mathPlugins", "highlightPlugin"))}


def test_katex_and_highlight_load_only_when_a_message_needs_them(
    drupe_server: Drupe, page: Page
) -> None:
    names = fetched_assets(page)
    page.goto(drupe_server.url)
    expect(page.get_by_test_id("composer-input")).to_be_visible()
    scripts = [n for n in names if n.endswith(".js")]
    assert scripts, names
    initial = sum((ASSETS / n).stat().st_size for n in scripts)
    assert initial < INITIAL_JS_LIMIT, (initial, scripts)
    assert lazy(names) == set() and not any(n.startswith("KaTeX_") for n in names)

    conversation_id = drupe_server.create_conversation("lazy")
    open_conversation(page, drupe_server, conversation_id)
    send(page, "plain words, a *list* of nothing special")
    wait_finished(page, 0)
    assert lazy(names) == set()

    send(page, PROMPT)
    answer = wait_finished(page, 1)
    expect(answer.locator("pre code.hljs .hljs-keyword").first).to_have_text("def")
    expect(answer.locator(".katex")).to_have_count(2)
    assert lazy(names) == {"mathPlugins", "highlightPlugin"}
