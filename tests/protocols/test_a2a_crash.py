"""A crash mid-task: after the restart the task is ``failed`` and says why.

(Agent-session rows are not checkpointed — ``SessionBackend.checkpoint_target`` is None by
design — so the streamed part of the answer is not kept across a crash.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState

from drupe.persistence.db import open_database
from tests.protocols.a2a_support import Rebuilt, a2a_client, artifact_text, send_request
from tests.protocols.serve_support import drupe_serve

pytestmark = pytest.mark.slow


async def test_a_task_survives_a_crash_as_failed_saying_why(tmp_path: Path) -> None:
    data = tmp_path / "server"
    data.mkdir()
    config = data / "config.toml"
    config.write_text('default_model = "scripted:echo"\n')
    async with open_database(None, data_dir=data) as db:
        key, _ = await db.api_keys.create("tests")
        agent = await db.agents.create_agent(
            name="slow", driver_type="inprocess", model_id="scripted:lorem?words=2000&rate=20",
            workspace=str(data / "ws"),
        )  # fmt: skip
    streamed = Rebuilt()
    async with drupe_serve(data, config) as (url, process):
        async with a2a_client(url, agent.id, key) as client:
            async for event in client.send_message(send_request("write a lot")):
                streamed.apply(event)
                if streamed.updates == 10:
                    break
            assert streamed.task is not None
            task_id = streamed.task.id
            task = await client.get_task(GetTaskRequest(id=task_id))
            assert task.status.state == TaskState.TASK_STATE_WORKING
        process.kill()  # no shutdown: nothing saved on the way out
        await process.wait()
    async with drupe_serve(data, config) as (url, _process), a2a_client(url, agent.id, key) as c:
        after = await c.get_task(GetTaskRequest(id=task_id))
    assert after.status.state == TaskState.TASK_STATE_FAILED
    assert "ServerRestart" in after.status.message.parts[0].text
    assert artifact_text(after) == ""  # see the module docstring
