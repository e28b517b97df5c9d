"""Message actions in a real browser: highlighted code with a Copy button, KaTeX, copy a
message, and export the conversation as Markdown and JSON (the files the links download).

The paced ``scripted:echo`` answers ``You said: <prompt>``, so a prompt holding a fenced code
block and a ``$$`` formula comes back as an answer rendering both. Waits are Playwright's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, expect

from tests.browser.conftest import Drupe
from tests.browser.test_chat_ui import assistant, open_conversation, send, wait_finished

pytestmark = pytest.mark.browser

CODE = 'def greet(name):\n    return "hi " + name'
PROMPT = f"look:\n\n```python\n{CODE}\n```\n\n$$\nE = mc^2\n$$\n\nand inline $a^2$ too"


def test_code_math_copy_and_export(
    drupe_server: Drupe, context: BrowserContext, tmp_path: Path
) -> None:
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=drupe_server.url)
    conversation_id = drupe_server.create_conversation("actions")
    page = context.new_page()
    open_conversation(page, drupe_server, conversation_id)
    send(page, PROMPT)
    answer = wait_finished(page)

    # highlight.js marked the Python keywords; KaTeX rendered the formula
    expect(answer.locator("pre code.hljs .hljs-keyword").first).to_have_text("def")
    expect(answer.locator(".katex-display .katex")).to_have_count(1)
    expect(answer.locator(".katex")).to_have_count(2)

    answer.get_by_test_id("copy-code").click()
    expect(answer.get_by_test_id("copy-code")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()").rstrip("\n") == CODE

    user = page.locator('[data-testid="message"][data-role="user"]').first
    user.hover()
    user.get_by_test_id("copy-message").click()
    expect(user.get_by_test_id("copy-message")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == PROMPT

    with page.expect_download() as markdown:
        page.get_by_test_id("export-markdown").click()
    assert markdown.value.suggested_filename == "actions.md"
    saved = tmp_path / "actions.md"
    markdown.value.save_as(saved)
    text = saved.read_text()
    assert text.startswith("# actions\n\n## You\n\n" + PROMPT)
    assert f"You said: {PROMPT}" in text

    with page.expect_download() as exported:
        page.get_by_test_id("export-json").click()
    saved = tmp_path / "actions.json"
    exported.value.save_as(saved)
    document = json.loads(saved.read_text())
    assert document["messages"] == drupe_server.conversation(conversation_id)["messages"]
    assert assistant(page).get_by_test_id("copy-message").count() == 1
