"""AG-UI and A2A in cluster mode: a client on the node that does not own the turn.

* A2A: a task streamed from node 1, dropped mid-answer and re-subscribed on node 2, rebuilds
  the stored answer exactly (the subscription follows the owner's chunk log); a cancel sent to
  node 2 stops the turn on its owner and the task ends ``canceled``.
* AG-UI: a run posted to node 2 into a thread node 1 is answering is enqueued and answered.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest
from a2a.types.a2a_pb2 import CancelTaskRequest, SubscribeToTaskRequest, TaskState

from tests.cluster.nodes import Node, cluster_nodes
from tests.protocols.a2a_support import Rebuilt, a2a_client, artifact_text, make_agent, send_request
from tests.protocols.agui_sse import events, parse, run_input, target, text_of

pytestmark = [pytest.mark.redis, pytest.mark.postgres]


@pytest.fixture
async def nodes(tmp_path: Path, prefix: str) -> AsyncIterator[tuple[Node, Node, str]]:
    async with cluster_nodes(tmp_path, prefix) as (a, b):
        key, _ = await a.runtime.db.api_keys.create("tests")
        yield a, b, key


async def test_a2a_resubscribe_and_cancel_on_the_other_node(
    nodes: tuple[Node, Node, str], tmp_path: Path
) -> None:
    a, b, key = nodes
    agent_id = await make_agent(a.runtime, tmp_path, "scripted:lorem?words=120&rate=40")
    async with a2a_client(a.url, agent_id, key) as on_a, a2a_client(b.url, agent_id, key) as on_b:
        first = Rebuilt()
        async for event in on_a.send_message(send_request("write")):
            first.apply(event)
            if first.updates == 4:
                break
        assert first.task is not None
        again = Rebuilt()
        async for event in on_b.subscribe(SubscribeToTaskRequest(id=first.task.id)):
            again.apply(event)
        assert again.task is not None
        assert again.task.status.state == TaskState.TASK_STATE_COMPLETED
        row = await a.runtime.db.messages.get(first.task.id)
        assert row is not None and row.status == "success"
        stored = "".join(p["text"] for p in row.parts if p.get("type") == "text")
        assert again.text == stored and len(stored.split()) == 120

        second = Rebuilt()
        canceled = None
        async for event in on_a.send_message(
            send_request("again", context_id=first.task.context_id, message_id="m-2")
        ):
            second.apply(event)
            if second.updates == 3 and canceled is None:
                assert second.task is not None
                canceled = await on_b.cancel_task(CancelTaskRequest(id=second.task.id))
        assert canceled is not None
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        assert second.task is not None
        assert second.task.status.state == TaskState.TASK_STATE_CANCELED
        row = await a.runtime.db.messages.get(second.task.id)
        assert row is not None and row.status == "paused"
        assert artifact_text(canceled) == "".join(
            p["text"] for p in row.parts if p.get("type") == "text"
        )


async def test_agui_run_on_the_other_node_is_enqueued(nodes: tuple[Node, Node, str]) -> None:
    a, b, key = nodes
    headers = {"authorization": f"Bearer {key}"}
    async with (
        httpx.AsyncClient(base_url=a.url, timeout=30, headers=headers) as on_a,
        httpx.AsyncClient(base_url=b.url, timeout=30, headers=headers) as on_b,
    ):
        first: list[dict[str, object]] = []
        speaking = anyio.Event()

        async def read_first(response: httpx.Response) -> None:
            async for event in events(response):
                first.append(event)
                if event["type"] == "TEXT_MESSAGE_CONTENT":
                    speaking.set()

        body = run_input("cl-th", "one")
        async with (
            on_a.stream("POST", target("scripted:lorem?words=60&rate=60"), json=body) as r,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(read_first, r)
            with anyio.fail_after(20):
                await speaking.wait()
            reply = await on_b.post(
                target("scripted:echo"), json=run_input("cl-th", "two", "run-2")
            )
            second = parse(reply.text)
        assert first[-1]["type"] == "RUN_FINISHED"
        assert second[-1]["type"] == "RUN_FINISHED", second
        assert "two" in text_of(second)
