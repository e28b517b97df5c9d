"""Settings → Providers & models in a real browser (issue 22 §5), auth off (the local admin).

The admin adds a provider pointing at a loopback fake OpenAI-compatible server, sees it marked
``database``, tests the connection (OK and the latency), then picks its model in the picker and
chats with it, without a restart. A provider whose server is down shows the error next to it
after "Test connection"; a bad URL is refused under its field. Screenshots of the page at
1280x800 and 390x844 go to ``docs/ui/settings-providers-{1280,390}.png``; axe-core finds no
serious violation at either size.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from playwright.sync_api import Browser, expect

from drupe.testing.fake_openai import openai_app
from drupe.testing.fake_replies import FakeReply
from tests.browser.conftest import DEFAULT_MODEL, Drupe, serve
from tests.browser.test_layout_a11y import serious_violations

pytestmark = pytest.mark.browser

SHOTS = Path(__file__).resolve().parents[2] / "docs" / "ui"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Drupe]:
    config = (
        f'default_model = "{DEFAULT_MODEL}"\n'
        '[providers.down]\ntype = "openai-compatible"\nbase_url = "http://127.0.0.1:9/v1"\n'
        'models = ["nothing"]\n'
    )
    with serve(tmp_path_factory.mktemp("providers"), config) as running:
        yield running


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    """A fake OpenAI-compatible server on loopback, in a thread; yields its ``/v1`` URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    server = uvicorn.Server(
        uvicorn.Config(
            openai_app([FakeReply(text="hello from the lab model")] * 5), log_level="warning"
        )
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def test_add_a_provider_test_it_and_chat_with_its_model(
    site: Drupe, upstream: str, browser: Browser
) -> None:
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    page.goto(f"{site.url}/#/settings/providers")
    expect(page.get_by_test_id("providers-page")).to_be_visible()
    down = page.locator('[data-testid="provider"][data-provider="down"]')
    expect(down.get_by_test_id("provider-source")).to_have_text("config.toml")

    page.get_by_test_id("provider-add").click()
    page.get_by_label("Name").fill("lab")
    page.get_by_label("Base URL").fill("not a url")
    page.get_by_test_id("provider-save").click()
    expect(page.get_by_test_id("error-baseUrl")).to_contain_text("http://")
    page.get_by_label("Base URL").fill(upstream)
    page.get_by_label("API key").fill("sk-lab-secret-9876")
    page.get_by_label("Models (comma-separated)").fill("lab-1")
    page.get_by_test_id("provider-save").click()

    lab = page.locator('[data-testid="provider"][data-provider="lab"]')
    expect(lab.get_by_test_id("provider-source")).to_have_text("database")
    expect(lab).to_contain_text("…9876")
    expect(page.locator("body")).not_to_contain_text("sk-lab-secret")
    lab.get_by_test_id("provider-test").click()
    expect(lab.get_by_test_id("provider-test-result")).to_contain_text("OK")

    down.get_by_test_id("provider-test").click()
    expect(down.get_by_test_id("provider-test-result")).to_have_text("failed")
    expect(down.get_by_test_id("provider-unreachable")).to_contain_text("Unreachable")

    for width, height in ((1280, 800), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(150)
        page.screenshot(path=str(SHOTS / f"settings-providers-{width}.png"), full_page=True)
        assert serious_violations(page) == [], width
    page.set_viewport_size({"width": 1280, "height": 800})

    # The new model is offered and answers, without a restart.
    page.goto(f"{site.url}/#/")
    page.get_by_test_id("model-picker").locator("summary").click()
    page.locator('[data-testid="model-option"][data-model-id="lab:lab-1"] input').check()
    default = page.locator(f'[data-testid="model-option"][data-model-id="{DEFAULT_MODEL}"] input')
    if default.is_checked():
        default.uncheck()
    page.get_by_test_id("model-picker").locator("summary").click()
    page.get_by_test_id("composer-input").fill("hi lab")
    page.get_by_test_id("send-button").click()
    expect(page.locator("body")).to_contain_text("hello from the lab model", timeout=20000)
    page.context.close()
