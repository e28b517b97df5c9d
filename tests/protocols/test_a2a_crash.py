"""A crash mid-task: after the restart the task is ``failed``, says why, and keeps its partial.

The agent-session row is checkpointed while the answer streams; ``drupe serve`` is killed with
SIGKILL (nothing saved on the way out) once a checkpoint holds part of the answer; the next
boot's reconcile ends the row ``error`` with the checkpointed parts.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, Task, TaskState

from drupe.agent.models.scripted import lorem
from drupe.persistence.db import open_database
from tests.protocols.a2a_support import Rebuilt, a2a_client, artifact_text, send_request
from tests.protocols.serve_support import drupe_serve

pytestmark = pytest.mark.slow

WORDS = 2000


async def test_a_task_survives_a_crash_as_failed_with_its_partial(tmp_path: Path) -> None:
    data = tmp_path / "server"
    data.mkdir()
    config = data / "config.toml"
    config.write_text('default_model = "scripted:echo"\n')
    async with open_database(None, data_dir=data) as db:
        key, _ = await db.api_keys.create("tests")
        agent = await db.agents.create_agent(
            name="slow", driver_type="inprocess", model_id=f"scripted:lorem?words={WORDS}&rate=20",
            workspace=str(data / "ws"),
        )  # fmt: skip
    streamed = Rebuilt()
    checkpointed = Task()
    async with drupe_serve(data, config) as (url, process):
        async with a2a_client(url, agent.id, key) as client:
            async for event in client.send_message(send_request("write a lot")):
                streamed.apply(event)
                if streamed.updates == 10:
                    break  # the client leaves; the answer goes on
            assert streamed.task is not None
            task_id = streamed.task.id
            # Poll the other process (no event crosses it) until a checkpoint holds part of
            # the answer; 40 s at most.
            with anyio.fail_after(40):
                for _ in range(100_000):
                    checkpointed = await client.get_task(GetTaskRequest(id=task_id))
                    if artifact_text(checkpointed):
                        break
                    await anyio.sleep(0.1)
            assert checkpointed.status.state == TaskState.TASK_STATE_WORKING
        process.kill()  # no shutdown: nothing saved on the way out
        await process.wait()
    async with drupe_serve(data, config) as (url, _process), a2a_client(url, agent.id, key) as c:
        after = await c.get_task(GetTaskRequest(id=task_id))
    assert after.status.state == TaskState.TASK_STATE_FAILED
    assert "ServerRestart" in after.status.message.parts[0].text
    partial = artifact_text(after)
    assert partial.startswith(artifact_text(checkpointed))  # at least what was checkpointed
    assert lorem(WORDS).startswith(partial.rstrip()) and len(partial.split()) < WORDS
