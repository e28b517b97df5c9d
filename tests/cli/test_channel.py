"""``drupe channel`` (CliRunner) against a real server whose config.toml has a webhook channel
(uvicorn in a thread, runtime and channels opened by the lifespan)."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from typer.testing import CliRunner

from drupe.api.app_factory import create_app_with_lifespan
from drupe.cli.main import app
from tests.gateway.conftest import make_settings

runner = CliRunner()
SECRET = "cli-test-secret-value-123456"
CHANNELS = """
[channels.hook]
type = "webhook"
secret_env = "DRUPE_TEST_HOOK_SECRET"
url = "http://127.0.0.1:9/unreachable"
allowed_users = ["u1"]
target = "model:scripted:echo"
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    data_dir = tmp_path_factory.mktemp("channel-cli")
    settings = make_settings(data_dir)
    assert settings.config_path is not None
    settings.config_path.write_text(settings.config_path.read_text() + CHANNELS)
    os.environ["DRUPE_TEST_HOOK_SECRET"] = SECRET
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            create_app_with_lifespan(settings), log_level="warning", timeout_graceful_shutdown=2
        )
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}", settings.config_path
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()
        os.environ.pop("DRUPE_TEST_HOOK_SECRET", None)


def test_list_show_send_and_check(served: tuple[str, Path]) -> None:
    url, config = served
    listed = runner.invoke(app, ["channel", "list", "--url", url])
    assert listed.exit_code == 0, listed.output
    assert "hook" in listed.output and "webhook" in listed.output and "connected" in listed.output
    shown = runner.invoke(app, ["channel", "show", "hook", "--url", url])
    assert shown.exit_code == 0 and "allowed users: u1" in shown.output
    sent = runner.invoke(
        app, ["channel", "send", "hook", "room1", "hello", "--delivery-id", "d1", "--url", url]
    )
    assert sent.exit_code == 0 and "delivery d1" in sent.output
    missing = runner.invoke(app, ["channel", "show", "nope", "--url", url])
    assert missing.exit_code == 1 and "unknown channel 'nope'" in missing.output
    checked = runner.invoke(app, ["channel", "check", "--config", str(config)])
    assert checked.exit_code == 0 and "ok  hook (webhook)" in checked.output
    for output in (listed.output, shown.output, sent.output, checked.output):
        assert SECRET not in output
