"""An agent calls a remote A2A agent served by a second ``drupe serve`` process (``a2a_<id>``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import httpx
import pytest

from drupe.admission.base import Submit
from drupe.admission.principal import LOCAL_ADMIN
from drupe.app import open_runtime
from drupe.ids import session_conversation_id
from drupe.persistence.db import open_database
from tests.gateway.conftest import make_settings
from tests.protocols.serve_support import drupe_serve

pytestmark = pytest.mark.slow


@pytest.fixture
async def remote(tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """``drupe serve`` with two agents (echo, slow) and a gateway key; yields url, ids, key."""
    data = tmp_path / "remote"
    data.mkdir()
    config = data / "config.toml"
    config.write_text('default_model = "scripted:echo"\n')
    async with open_database(None, data_dir=data) as db:
        key, _ = await db.api_keys.create("caller")
        echo = await db.agents.create_agent(
            name="echo", driver_type="inprocess", model_id="scripted:echo",
            workspace=str(data / "echo"),
        )  # fmt: skip
        slow = await db.agents.create_agent(
            name="slow", driver_type="inprocess", model_id="scripted:lorem?words=400&rate=20",
            workspace=str(data / "slow"),
        )  # fmt: skip
    async with drupe_serve(data, config) as (url, _process):
        yield {"url": url, "key": key, "echo": echo.id, "slow": slow.id}


async def _remote_tasks(remote: dict[str, Any], agent: str) -> list[dict[str, Any]]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(
            f"{remote['url']}/a2a/{agent}",
            json=body,
            headers={"authorization": f"Bearer {remote['key']}", "A2A-Version": "1.0"},
        )
    tasks: list[dict[str, Any]] = response.json()["result"].get("tasks", [])
    return tasks


async def _until_remote_works(remote: dict[str, Any], agent: str) -> None:
    """Poll the other process (no event crosses it) until its task works; 40 s at most."""
    with anyio.fail_after(40):
        for _ in range(100_000):
            tasks = await _remote_tasks(remote, agent)
            if any(t["status"]["state"] == "TASK_STATE_WORKING" for t in tasks):
                return
            await anyio.sleep(0.1)


async def test_an_agent_calls_a_remote_a2a_agent_and_stop_cancels_it(
    tmp_path: Path, remote: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRUPE_TEST_REMOTE_KEY", remote["key"])
    config = tmp_path / "local.toml"
    config.write_text(
        'default_model = "scripted:echo"\n'
        f'[a2a.remotes.echo]\nurl = "{remote["url"]}/a2a/{remote["echo"]}"\n'
        'token_env = "DRUPE_TEST_REMOTE_KEY"\n'
        f'[a2a.remotes.slow]\nurl = "{remote["url"]}/a2a/{remote["slow"]}'
        '/.well-known/agent-card.json"\n'
        'token_env = "DRUPE_TEST_REMOTE_KEY"\n'
    )
    (tmp_path / "local").mkdir()
    settings = make_settings(tmp_path / "local", config_path=config)
    async with open_runtime(settings) as runtime:
        agents = runtime.db.agents

        async def turn(tool: str, message: str) -> str:
            args = quote(json.dumps({"message": message}, separators=(",", ":")))
            agent = await agents.create_agent(
                name=f"caller-{tool}", driver_type="inprocess",
                model_id=f"scripted:tool?tool={tool}&args={args}",
                workspace=str(tmp_path / tool), tools=[tool],
            )  # fmt: skip
            session = await agents.create_session(agent.id)
            conversation = session_conversation_id(session.id)
            submit = Submit(conversation_id=conversation, parts=[{"type": "text", "text": "go"}])
            await runtime.conversations.submit(LOCAL_ADMIN, submit)
            return conversation

        # 1. A whole call: the remote's answer is the tool's output in the calling turn.
        conversation = await turn("a2a_echo", "hello remote")
        with anyio.fail_after(40):
            await runtime.manager.wait_settled(conversation)
        rows = await runtime.db.messages.list_for_conversation(conversation)
        answer = rows[-1]
        assert answer.status == "success", answer.parts
        call = next(p for p in answer.parts if p["type"] == "tool-a2a_echo")
        assert call["state"] == "output-available", call
        assert call["output"]["text"] == "You said: hello remote"
        assert call["output"]["state"] == "completed"
        (remote_task,) = await _remote_tasks(remote, remote["echo"])
        assert remote_task["id"] == call["output"]["taskId"]

        # 2. Stop while the remote task works: the remote task is canceled.
        conversation = await turn("a2a_slow", "write a lot")
        await _until_remote_works(remote, remote["slow"])
        assert await runtime.conversations.stop(LOCAL_ADMIN, conversation)
        (slow_task,) = await _remote_tasks(remote, remote["slow"])
        assert slow_task["status"]["state"] == "TASK_STATE_CANCELED"
        rows = await runtime.db.messages.list_for_conversation(conversation)
        assert rows[-1].status == "paused"
