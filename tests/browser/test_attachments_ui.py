"""Attachments in a real browser: an image picked or dropped on the composer is sent as a file
part, stored with the user message and shown in it; a file over the budget of ``/api/limits``
is refused by the field, and nothing is sent or stored.
"""

from __future__ import annotations

import base64
import struct
import zlib

import pytest
from playwright.sync_api import Page, expect

from drupe.api.limits_routes import attachment_budget
from drupe.settings import Limits
from tests.browser.conftest import Drupe
from tests.browser.test_chat_ui import open_conversation, wait_finished

pytestmark = pytest.mark.browser


def png(width: int = 4, height: int = 3) -> bytes:
    """A real (tiny, red) PNG, built with zlib: no image library needed."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def test_limits_route_states_the_budget(drupe_server: Drupe) -> None:
    limits = drupe_server.api.get("/api/limits").json()
    assert limits["maxBodyBytes"] == Limits().max_body_bytes
    assert limits["maxAttachmentBytes"] == attachment_budget(Limits().max_body_bytes)
    assert 0 < limits["maxAttachmentBytes"] < limits["maxBodyBytes"]


def test_an_attached_image_is_stored_and_shown(drupe_server: Drupe, page: Page) -> None:
    conversation_id = drupe_server.create_conversation("picture")
    open_conversation(page, drupe_server, conversation_id)
    expect(page.get_by_test_id("attachment-hint")).to_contain_text("MB per message")
    image = png()
    page.get_by_test_id("attachment-input").set_input_files(
        files=[{"name": "red.png", "mimeType": "image/png", "buffer": image}]
    )
    expect(page.get_by_test_id("attachment")).to_contain_text("red.png")
    page.get_by_test_id("composer-input").fill("what colour is this?")
    page.get_by_test_id("send-button").click()
    wait_finished(page)

    user = drupe_server.conversation(conversation_id)["messages"][0]
    files = [p for p in user["parts"] if p["type"] == "file"]
    assert [(f["mediaType"], f["filename"]) for f in files] == [("image/png", "red.png")]
    assert files[0]["url"] == "data:image/png;base64," + base64.b64encode(image).decode()
    shown = page.locator('[data-testid="message"][data-role="user"] img.file-image')
    expect(shown).to_have_attribute("alt", "red.png")
    assert shown.evaluate("img => img.naturalWidth") == 4

    # after a reload the stored message shows the image too
    page.reload()
    expect(page.locator('[data-role="user"] img.file-image')).to_have_count(1)


def test_a_dropped_file_is_attached(drupe_server: Drupe, page: Page) -> None:
    conversation_id = drupe_server.create_conversation("dropped")
    open_conversation(page, drupe_server, conversation_id)
    expect(page.get_by_test_id("attachment-hint")).to_contain_text("MB per message")
    transfer = page.evaluate_handle(
        """() => {
            const dt = new DataTransfer();
            dt.items.add(new File(["hello notes"], "notes.txt", { type: "text/plain" }));
            return dt;
        }"""
    )
    form = page.get_by_test_id("composer-form")
    form.dispatch_event("dragover", {"dataTransfer": transfer})
    form.dispatch_event("drop", {"dataTransfer": transfer})
    expect(page.get_by_test_id("attachment")).to_contain_text("notes.txt")
    page.get_by_test_id("send-button").click()  # a file alone is a message
    wait_finished(page)
    user = drupe_server.conversation(conversation_id)["messages"][0]
    assert [p.get("filename") for p in user["parts"]] == ["notes.txt"]
    link = page.locator('[data-role="user"] a.file-link')
    expect(link).to_have_text("notes.txt")


def test_an_oversize_file_is_refused_by_the_field(drupe_server: Drupe, page: Page) -> None:
    conversation_id = drupe_server.create_conversation("too big")
    open_conversation(page, drupe_server, conversation_id)
    budget = drupe_server.api.get("/api/limits").json()["maxAttachmentBytes"]
    expect(page.get_by_test_id("attachment-hint")).to_contain_text("MB per message")
    page.get_by_test_id("attachment-input").set_input_files(
        files=[
            {
                "name": "huge.bin",
                "mimeType": "application/octet-stream",
                "buffer": b"x" * (budget + 1),
            }
        ]
    )
    error = page.get_by_test_id("attachment-error")
    expect(error).to_contain_text("huge.bin is")
    expect(error).to_contain_text("files can be at most")
    expect(page.get_by_test_id("attachment")).to_have_count(0)
    expect(page.get_by_test_id("send-button")).to_be_disabled()
    assert drupe_server.conversation(conversation_id)["messages"] == []
