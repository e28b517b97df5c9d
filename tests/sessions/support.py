"""Test support for agent sessions: a real manager, dispatcher, SQLite and the fake driver.

``open_env(url)`` builds the runtime the way ``drupe.app`` does (the agent-session provider
first, the persistent provider as the catch-all) with a ``FakeDriver`` registered and manual
idle timers, so tests drive time instead of sleeping.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio

from drupe.admission.agent_session import AgentSessionProvider
from drupe.admission.base import Submit
from drupe.admission.dispatch import Dispatcher, DispatchResult
from drupe.admission.persistent import PersistentProvider
from drupe.persistence.db import Database, open_database
from drupe.persistence.records import MessageRecord
from drupe.sessions.drivers.registry import DriverRegistry
from drupe.sessions.host import AgentSessionHost, SessionEntry
from drupe.streaming.config import StreamConfig
from drupe.streaming.listeners.base import BaseListener, StreamEvent, TerminalResult
from drupe.streaming.manager import StreamManager
from drupe.testing.fake_driver import FakeDriver


class ManualTimers:
    """An injectable ``sleep``: sleepers wait until the test fires them."""

    def __init__(self) -> None:
        self.sleepers: list[tuple[float, anyio.Event]] = []
        self._changed = anyio.Event()

    async def sleep(self, seconds: float) -> None:
        event = anyio.Event()
        self.sleepers.append((seconds, event))
        self._changed.set()
        self._changed = anyio.Event()
        try:
            await event.wait()
        finally:
            self.sleepers = [s for s in self.sleepers if s[1] is not event]

    async def wait_armed(self) -> float:
        while not self.sleepers:
            await self._changed.wait()
        return self.sleepers[-1][0]

    def fire(self) -> None:
        for _seconds, event in self.sleepers:
            event.set()


class Watcher(BaseListener):
    """A subscriber that records every chunk and terminal; optionally holds its ``on_done``."""

    def __init__(self, listener_id: str = "wc:1") -> None:
        super().__init__(listener_id)
        self.events: list[StreamEvent] = []
        self.terminals: list[TerminalResult] = []
        self.hold: anyio.Event | None = None
        self._changed = anyio.Event()

    def on_chunk(self, event: StreamEvent) -> None:
        self.events.append(event)
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_chunk(self, chunk_type: str) -> StreamEvent:
        """Wait until a chunk of this type arrived; returns the latest such."""
        while not any(e.chunk.get("type") == chunk_type for e in self.events):
            await self._changed.wait()
        return next(e for e in reversed(self.events) if e.chunk.get("type") == chunk_type)

    async def wait_text(self, fragment: str) -> None:
        """Wait until the streamed text contains ``fragment``."""
        while fragment not in "".join(self.texts()):
            await self._changed.wait()

    async def on_done(self, result: TerminalResult) -> None:
        await self._record(result)

    async def on_paused(self, result: TerminalResult) -> None:
        await self._record(result)

    async def on_error(self, result: TerminalResult) -> None:
        await self._record(result)

    async def _record(self, result: TerminalResult) -> None:
        self.terminals.append(result)
        self._changed.set()
        self._changed = anyio.Event()
        if self.hold is not None:
            await self.hold.wait()

    async def wait_terminals(self, count: int) -> TerminalResult:
        while len(self.terminals) < count:
            await self._changed.wait()
        return self.terminals[count - 1]

    def texts(self) -> list[str]:
        return [e.chunk["delta"] for e in self.events if e.chunk.get("type") == "text-delta"]


@dataclass
class Env:
    db: Database
    manager: StreamManager
    dispatcher: Dispatcher
    host: AgentSessionHost
    driver: FakeDriver
    drivers: DriverRegistry
    timers: ManualTimers
    agent_id: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    async def new_session(self, *, model_id: str | None = "scripted:a", **settings: Any) -> str:
        agent = await self.db.agents.create_agent(
            name="coder", driver_type=self.driver.type, model_id=model_id
        )
        self.agent_id = agent.id
        session = await self.db.agents.create_session(agent.id, settings=settings)
        return session.id

    async def submit(
        self, session_id: str, text: str, subscribers: Sequence[BaseListener] = (), **meta: Any
    ) -> DispatchResult:
        return await self.dispatcher.dispatch(
            Submit(
                conversation_id=f"agent-session:{session_id}",
                parts=[{"type": "text", "text": text}],
                metadata=meta or None,
            ),
            subscribers,
        )

    async def rows(self, session_id: str) -> list[MessageRecord]:
        return await self.db.messages.list_for_conversation(f"agent-session:{session_id}")

    def entry(self, session_id: str) -> SessionEntry:
        entry = self.host.entry(session_id)
        assert entry is not None
        return entry

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Wait until ``predicate`` holds, re-checking after every host reducer step and every
        stream status change."""
        changed = anyio.Event()

        def observe(_cid: str, _record: object) -> None:
            changed.set()

        async def relay(entry_changed: anyio.Event, scope: anyio.CancelScope) -> None:
            await entry_changed.wait()
            changed.set()
            scope.cancel()

        remove = self.manager.add_status_observer(observe)
        try:
            while not predicate():
                async with anyio.create_task_group() as tg:
                    for entry in list(self.host.entries.values()):
                        tg.start_soon(relay, entry.changed, tg.cancel_scope)
                    await changed.wait()
                    tg.cancel_scope.cancel()
                changed = anyio.Event()
        finally:
            remove()


def text_of(row: MessageRecord) -> str:
    return "".join(p.get("text", "") for p in row.parts if p.get("type") == "text")


@asynccontextmanager
async def open_env(
    url: str,
    *,
    driver: FakeDriver | None = None,
    idle_ttl: float = 300.0,
    connect_args: dict[str, Any] | None = None,
) -> AsyncIterator[Env]:
    driver = driver or FakeDriver()
    drivers = DriverRegistry()
    drivers.register(driver)
    timers = ManualTimers()
    async with (
        open_database(url, connect_args=connect_args) as db,
        StreamManager(StreamConfig(grace_period=30.0)) as manager,
    ):
        host = AgentSessionHost(
            manager=manager,
            drivers=drivers,
            agents=db.agents,
            messages=db.messages,
            idle_ttl=idle_ttl,
            sleep=timers.sleep,
        )
        persistent = PersistentProvider(
            conversations=db.conversations,
            messages=db.messages,
            runner=_no_runner,
            default_model=lambda: "scripted:a",
        )
        provider = AgentSessionProvider(host=host, messages=db.messages, drivers=drivers)
        dispatcher = Dispatcher(manager, [provider, persistent])
        yield Env(db, manager, dispatcher, host, driver, drivers, timers)
        with anyio.fail_after(5):
            await manager.shutdown()
            await host.aclose()


def _no_runner(spec: Any) -> Any:
    raise AssertionError("agent-session turns never reach the chat runner")
