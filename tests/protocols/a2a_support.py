"""The Python ``a2a-sdk`` client against a loopback Drupe, and task rebuilding (tests only)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from a2a.client import Client, ClientConfig, create_client
from a2a.server.tasks.task_manager import append_artifact_to_task
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, StreamResponse, Task

from drupe.app import Runtime


async def make_agent(runtime: Runtime, tmp_path: Path, model: str, name: str = "helper") -> str:
    agent = await runtime.db.agents.create_agent(
        name=name, driver_type="inprocess", model_id=model, workspace=str(tmp_path / name)
    )
    return agent.id


@asynccontextmanager
async def a2a_client(
    base: str, agent_id: str, key: str, *, streaming: bool = True
) -> AsyncIterator[Client]:
    headers = {"authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        config = ClientConfig(httpx_client=http, streaming=streaming)
        client = await create_client(f"{base}/a2a/{agent_id}", client_config=config)
        try:
            yield client
        finally:
            await client.close()


def send_request(
    text: str, *, context_id: str = "", task_id: str = "", message_id: str = "m-1"
) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            message_id=message_id,
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
            context_id=context_id,
            task_id=task_id,
        )
    )


class Rebuilt:
    """A task rebuilt from a stream, the way a client merges the updates."""

    def __init__(self) -> None:
        self.task: Task | None = None
        self.updates = 0

    def apply(self, event: StreamResponse) -> None:
        if event.HasField("task"):
            self.task = Task()
            self.task.CopyFrom(event.task)
            return
        assert self.task is not None, "the first event of a task stream is the task"
        self.updates += 1
        if event.HasField("artifact_update"):
            append_artifact_to_task(self.task, event.artifact_update)
        elif event.HasField("status_update"):
            self.task.status.CopyFrom(event.status_update.status)

    @property
    def text(self) -> str:
        assert self.task is not None
        return "".join(p.text for a in self.task.artifacts for p in a.parts)


def artifact_text(task: Task) -> str:
    return "".join(p.text for a in task.artifacts for p in a.parts)
