"""A remote A2A agent built only from ``a2a-sdk``'s server parts, paced by the test (tests only).

``paced_agent()`` serves it on loopback (``serve_app``) and yields a ``PacedAgent``: the URL,
the SDK's task store, the cancel requests it received, and one gate per step. The executor
streams a task the way a real agent does:

0. the task (``submitted``), then ``working`` with the status message ``"looking things up"``;
1. (after gate 0) the artifact ``answer``: ``"Part one. "``;
2. (after gate 1) ``working`` with ``"reading sources"``;
3. (after gate 2) the artifact ``answer`` appended: ``"Part two."``;
4. (after gate 3) ``completed``.

A gate left closed keeps the task ``working`` until it is canceled; ``cancel`` is recorded and
answered ``canceled`` (the SDK cancels ``execute`` first).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
from a2a.helpers.proto_helpers import new_task, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    ListTasksRequest,
    Message,
    Part,
    Task,
    TaskState,
)
from a2a.utils.constants import PROTOCOL_VERSION_1_0
from starlette.applications import Starlette

from drupe.testing.loopback import serve_app

STEPS = 4


@dataclass
class PacedAgent:
    url: str = ""
    store: InMemoryTaskStore = field(default_factory=InMemoryTaskStore)
    gates: list[anyio.Event] = field(default_factory=lambda: [anyio.Event() for _ in range(STEPS)])
    cancels: list[str] = field(default_factory=list)

    async def tasks(self) -> list[Task]:
        """Every task the agent's store holds (as its own ``ListTasks`` reads them)."""
        listed = await self.store.list(ListTasksRequest(), ServerCallContext())
        return list(listed.tasks)


class _Executor(AgentExecutor):
    def __init__(self, agent: PacedAgent) -> None:
        self.agent = agent

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        assert context.message is not None
        task = new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED, [], [context.message])
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task_id, context_id)

        def said(text: str) -> Message:
            return new_text_message(text, context_id=context_id, task_id=task_id)

        gates = self.agent.gates
        await updater.start_work(said("looking things up"))
        await gates[0].wait()
        await updater.add_artifact([Part(text="Part one. ")], artifact_id="answer")
        await gates[1].wait()
        await updater.update_status(TaskState.TASK_STATE_WORKING, said("reading sources"))
        await gates[2].wait()
        await updater.add_artifact([Part(text="Part two.")], artifact_id="answer", append=True)
        await gates[3].wait()
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.agent.cancels.append(context.task_id or "")
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


def _card(url: str) -> AgentCard:
    return AgentCard(
        name="paced",
        description="A remote agent that streams four steps, one per gate.",
        supported_interfaces=[
            AgentInterface(
                url=url, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION_1_0
            )
        ],
        version="1.0",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="paced", name="paced", description="Four steps.", tags=["test"])],
    )


@asynccontextmanager
async def paced_agent() -> AsyncIterator[PacedAgent]:
    """Serve the paced agent on loopback; its card names the JSON-RPC endpoint at ``/``."""
    agent = PacedAgent()

    async def with_url(card: AgentCard) -> AgentCard:
        return _card(agent.url + "/")

    handler = DefaultRequestHandlerV2(_Executor(agent), agent.store, _card("http://unbound/"))
    routes = [
        *create_agent_card_routes(_card("http://unbound/"), card_modifier=with_url),
        *create_jsonrpc_routes(handler, "/"),
    ]
    async with serve_app(Starlette(routes=routes)) as url:
        agent.url = url
        yield agent
