"""The channels page in a real browser: a server whose config.toml has a signed webhook
channel; a signed inbound message binds a chat; the page shows the channel's state, its bound
chat (linked to the conversation), its allow-list and the last delivery error, and never a
secret. The webhook's outbound URL is a closed loopback port, so delivery fails visibly."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import orjson
import pytest
import uvicorn
from playwright.sync_api import Page, expect

from drupe.api.app_factory import create_app_with_lifespan
from drupe.channels.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign
from drupe.settings import AuthSettings, Settings
from tests.browser.conftest import Drupe, _StartupSignal

pytestmark = pytest.mark.browser

SECRET = "browser-webhook-secret-9876543210"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def channel_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Drupe]:
    data_dir = tmp_path_factory.mktemp("drupe-channels-browser")
    config = data_dir / "config.toml"
    config.write_text(
        'default_model = "scripted:echo"\n\n'
        "[channels.bridge]\n"
        'type = "webhook"\n'
        'secret_env = "DRUPE_BROWSER_HOOK_SECRET"\n'
        f'url = "http://127.0.0.1:{_closed_port()}/hook"\n'
        'allowed_users = ["alice"]\n'
        'target = "model:scripted:echo"\n'
        "debounce = 0\n"
    )
    os.environ["DRUPE_BROWSER_HOOK_SECRET"] = SECRET
    started = threading.Event()
    app = _StartupSignal(
        create_app_with_lifespan(
            Settings(data_dir=data_dir, config_path=config, auth=AuthSettings(enabled=False))
        ),
        started,
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, lifespan="on", log_level="warning", timeout_graceful_shutdown=2)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        if not started.wait(timeout=30) or app.failure is not None:
            raise RuntimeError(f"the drupe server did not start: {app.failure or 'timeout'}")
        url = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=url, timeout=20) as api:
            yield Drupe(url=url, api=api, data_dir=data_dir)
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()
        os.environ.pop("DRUPE_BROWSER_HOOK_SECRET", None)


def test_the_channels_page_shows_state_chats_and_the_last_error(
    channel_server: Drupe, page: Page
) -> None:
    body = orjson.dumps(
        {"type": "message", "chatId": "room-7", "userId": "alice", "text": "hello bridge"}
    )
    stamp = str(int(time.time()))
    response = channel_server.api.post(
        "/channels/bridge/webhook",
        content=body,
        headers={
            "content-type": "application/json",
            TIMESTAMP_HEADER: stamp,
            SIGNATURE_HEADER: sign(SECRET, stamp, body),
        },
    )
    assert response.status_code == 202

    page.goto(channel_server.url)
    page.get_by_test_id("channels-link").click()
    card = page.get_by_test_id("channel-card").filter(has_text="bridge")
    expect(card).to_have_attribute("data-state", "connected")
    expect(card).to_contain_text("webhook")
    expect(card.get_by_test_id("channel-target")).to_have_text("model:scripted:echo")
    expect(card.get_by_test_id("channel-allowed-users")).to_have_text("alice")
    expect(card).to_contain_text("$DRUPE_BROWSER_HOOK_SECRET")
    # the answer could not be delivered (closed port): the page says so (re-read every 5 s)
    page.get_by_test_id("channels-refresh").click()
    expect(card.get_by_test_id("channel-error")).to_contain_text("Last error", timeout=20_000)
    chat = card.get_by_test_id("channel-chat")
    expect(chat).to_have_attribute("data-chat-id", "room-7")
    assert SECRET not in page.content()

    chat.get_by_role("link").click()  # the bound conversation opens
    expect(page.get_by_test_id("message-list")).to_contain_text("hello bridge")
    assert page.url.startswith(f"{channel_server.url}/#/c/conv_")
