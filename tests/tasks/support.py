"""Test support for agent tasks: the session test runtime plus a ``TaskService`` on a manual clock.

``open_tasks(url)`` builds the real manager, dispatcher, agent-session host and database (as
``tests.sessions.support.open_env`` does, with the ``FakeDriver``), and a ``TaskService`` whose
clock is a ``ManualClock`` and whose delivery port records what it is asked to send.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio

from drupe.admission.approval_service import ApprovalService
from drupe.admission.ephemeral import EphemeralStore
from drupe.admission.local_conversations import LocalConversations
from drupe.persistence.schedule_records import TaskRunRecord
from drupe.tasks.delivery import BufferedDelivery, DeliveryTarget
from drupe.tasks.run import TaskDeps
from drupe.tasks.service import TaskService
from drupe.testing.fake_driver import FakeDriver
from drupe.testing.task_clock import ManualClock
from tests.sessions.support import Env, open_env

START = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)


@dataclass
class Sent:
    """What the delivery port was asked to send, in order."""

    items: list[tuple[DeliveryTarget, str]] = field(default_factory=list)
    changed: anyio.Event = field(default_factory=anyio.Event)

    async def send(self, target: DeliveryTarget, text: str) -> None:
        self.items.append((target, text))
        self.changed.set()
        self.changed = anyio.Event()

    async def wait(self, count: int) -> list[tuple[DeliveryTarget, str]]:
        while len(self.items) < count:
            await self.changed.wait()
        return self.items


@dataclass
class TasksEnv:
    env: Env
    service: TaskService
    clock: ManualClock
    sent: Sent

    @property
    def store(self) -> Any:
        return self.env.db.schedules

    async def agent(self, **values: Any) -> str:
        agent = await self.env.db.agents.create_agent(
            name="reporter", driver_type=self.env.driver.type, model_id="scripted:a", **values
        )
        self.env.agent_id = agent.id
        return agent.id

    async def wait_run(self, run_id: str) -> TaskRunRecord:
        return await self.service.wait_run(run_id)

    async def runs(self, schedule_id: str) -> list[TaskRunRecord]:
        """Oldest first."""
        return list(reversed(await self.store.list_runs(schedule_id=schedule_id)))

    async def fire_at(self, when: datetime, service: TaskService | None = None) -> None:
        """Once the runner sleeps, move the clock to ``when`` and wait for its next pass."""
        runner = (service or self.service).runner
        await runner.wait_napping()
        ticks = runner.ticks
        self.clock.set(when)
        runner.wake()  # a pass at ``when`` even if the runner sleeps past it
        await runner.wait_ticks(ticks + 1)


@asynccontextmanager
async def open_tasks(
    url: str,
    *,
    connect_args: dict[str, Any] | None = None,
    start: datetime = START,
    run_scheduler: bool = True,
    driver: FakeDriver | None = None,
) -> AsyncIterator[TasksEnv]:
    clock = ManualClock(start)
    sent = Sent()
    async with open_env(url, connect_args=connect_args, driver=driver) as env:
        conversations = LocalConversations(
            manager=env.manager,
            dispatcher=env.dispatcher,
            approvals=ApprovalService(env.dispatcher, env.db.messages),
            conversations=env.db.conversations,
            messages=env.db.messages,
            ephemeral=EphemeralStore(),
            sessions=env.host,
        )
        deps = TaskDeps(
            db=env.db,
            conversations=conversations,
            host=env.host,
            drivers=env.drivers,
            delivery=BufferedDelivery(sent.send),
            clock=clock,
        )
        async with TaskService(
            deps, run_scheduler=run_scheduler, poll_interval=timedelta(hours=1)
        ) as service:
            yield TasksEnv(env, service, clock, sent)


def reuse_service(tasks: TasksEnv, **kwargs: Any) -> TaskService:
    """A second service on the same runtime and clock (a restarted or second process)."""
    return TaskService(tasks.service.deps, poll_interval=timedelta(hours=1), **kwargs)
