"""``drupe agent`` (CliRunner) against a real server (uvicorn in a thread, runtime via lifespan).

The server socket is bound and listening before uvicorn starts, so requests queue in the
backlog until the lifespan has opened the runtime: nothing waits for the server to be ready.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from typer.testing import CliRunner

from drupe.api.app_factory import create_app_with_lifespan
from drupe.cli.main import app
from tests.gateway.conftest import make_settings

runner = CliRunner()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data_dir = tmp_path_factory.mktemp("agent-cli")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            create_app_with_lifespan(make_settings(data_dir)),
            log_level="warning",
            timeout_graceful_shutdown=2,
        )
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


def agent(served: str, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["agent", *args, "--url", served])
    return result.exit_code, result.output


def test_create_list_session_chat_delete(served: str, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    code, out = agent(
        served, "create", "coder", "--driver", "inprocess", "--model", "scripted:echo",
        "--workspace", str(workspace), "--instructions", "be brief",
    )  # fmt: skip
    assert code == 0, out
    agent_id = out.strip().splitlines()[-1]
    assert agent_id.startswith("agent_")
    assert "created agent coder (inprocess, scripted:echo)" in out and str(workspace) in out
    code, out = agent(served, "list")
    assert code == 0 and agent_id in out and "coder" in out and "scripted:echo" in out

    code, out = agent(served, "session", agent_id, "--title", "first")
    assert code == 0, out
    conversation_id = out.strip().splitlines()[-1]
    assert conversation_id.startswith("agent-session:sess_")
    assert f"drupe chat {conversation_id} --url {served}" in out
    code, out = agent(served, "sessions", agent_id)
    assert code == 0 and conversation_id in out and "first" in out and "idle" in out

    # `drupe chat agent-session:<sid>` chats with the session
    chatted = subprocess.run(
        [sys.executable, "-m", "drupe", "chat", conversation_id, "--url", served],
        input="hello agent\n",
        capture_output=True,
        text=True,
        timeout=40,
    )
    assert chatted.returncode == 0, chatted.stderr
    assert "You said: hello agent" in chatted.stdout
    detail = httpx.get(f"{served}/api/conversations/{conversation_id}", timeout=20).json()
    assert [(m["role"], m["status"]) for m in detail["messages"]] == [
        ("user", "success"),
        ("assistant", "success"),
    ]

    code, out = agent(served, "delete", agent_id)
    assert code == 0 and f"deleted agent {agent_id}" in out
    assert httpx.get(f"{served}/api/conversations/{conversation_id}", timeout=20).status_code == 404
    code, out = agent(served, "delete", agent_id)
    assert code == 1 and "HTTP 404" in out and agent_id in out


def test_defaults_and_errors(served: str, tmp_path: Path) -> None:
    code, out = agent(served, "create", "plain")
    assert code == 0, out
    agent_id = out.strip().splitlines()[-1]
    assert "(inprocess, scripted:echo)" in out and f"workspaces/{agent_id}" in out
    code, out = agent(served, "create", "x", "--driver", "nope")
    assert code == 1 and "unknown driver 'nope'" in out and "inprocess" in out
    code, out = agent(served, "create", "x", "--model", "nope:model")
    assert code == 1 and "unknown model 'nope:model'" in out
    code, out = agent(served, "create", "x", "--workspace", str(tmp_path / "missing"))
    assert code == 1 and "not a directory" in out
    code, out = agent(served, "session", "agent_nope")
    assert code == 1 and "unknown agent 'agent_nope'" in out
    code, out = agent(served, "sessions", agent_id)
    assert code == 0 and f"drupe agent session {agent_id}" in out
    assert agent(served, "delete", agent_id)[0] == 0


def test_an_unreachable_server_is_one_clear_line() -> None:
    result = runner.invoke(app, ["agent", "list", "--url", "http://127.0.0.1:9"])
    assert result.exit_code == 1 and "cannot reach Drupe at http://127.0.0.1:9" in result.output
    assert "Traceback" not in result.output
