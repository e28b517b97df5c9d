"""The steer-boundary roll through the real host, with the in-process driver (issue 5 §5).

Everything is real: SQLite, the stream manager, the dispatcher with the agent-session provider,
the host and its reducer, the in-process driver running Drupe's agent loop over a scripted model.
A scripted ``Pause`` waits on a gate the test opens, so the steer lands mid-turn without sleeps.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from drupe.admission.agent_session import AgentSessionProvider
from drupe.admission.base import Submit
from drupe.admission.dispatch import Dispatcher
from drupe.agent.models.script import Echo, Fail, Pause, Text, ToolCall
from drupe.chunks.types import Chunk, UIMessage
from drupe.persistence.db import Database, open_database
from drupe.persistence.records import MessageRecord
from drupe.sessions.drivers.inprocess import InProcessConnection, InProcessDriver
from drupe.sessions.drivers.registry import DriverRegistry
from drupe.sessions.host import AgentSessionHost
from drupe.streaming.config import StreamConfig
from drupe.streaming.listeners.base import StreamEvent
from drupe.streaming.manager import StreamManager
from drupe.testing.recording import RecordingListener
from tests.persistence.conftest import Target
from tests.sessions.inprocess.support import Gate, Models, script_model


@dataclass
class Stack:
    db: Database
    host: AgentSessionHost
    dispatcher: Dispatcher
    conversation_id: str

    @property
    def session_id(self) -> str:
        return self.conversation_id.removeprefix("agent-session:")

    async def settled(self) -> None:
        """Until the host is idle again (persistence confirmed every terminal)."""
        while self.host.is_busy(self.session_id):
            await anyio.wait_all_tasks_blocked()


class Watcher(RecordingListener):
    """A subscriber that can wait for the first chunk of a type."""

    def __init__(self) -> None:
        super().__init__("watcher")
        self.waiting: dict[str, anyio.Event] = {}

    def on_chunk(self, event: StreamEvent) -> None:
        super().on_chunk(event)
        seen = self.waiting.get(str(event.chunk.get("type")))
        if seen is not None:
            seen.set()

    async def first(self, chunk_type: str) -> Chunk:
        await self.waiting.setdefault(chunk_type, anyio.Event()).wait()
        return next(c for c in self.chunks() if c.get("type") == chunk_type)


@asynccontextmanager
async def stack_for(
    tmp_path: Path,
    model_id: str,
    models: Models,
    settings: dict[str, Any] | None = None,
    database: Target | None = None,
) -> AsyncIterator[Stack]:
    url = database.url if database else f"sqlite+aiosqlite:///{tmp_path / 'drupe.db'}"
    connect_args = database.connect_args if database else None
    async with (
        open_database(url, connect_args=connect_args) as db,
        StreamManager(StreamConfig()) as manager,
    ):

        async def load_history(session_id: str) -> list[UIMessage]:
            rows = await db.messages.list_for_conversation(f"agent-session:{session_id}")
            return [row.as_ui_message() for row in rows]

        async with InProcessDriver(resolve_model=models, load_history=load_history) as driver:
            drivers = DriverRegistry()
            drivers.register(driver)
            host = AgentSessionHost(
                manager=manager, drivers=drivers, agents=db.agents, messages=db.messages
            )
            provider = AgentSessionProvider(host=host, messages=db.messages, drivers=drivers)
            reconciled = anyio.Event()
            reconciled.set()
            dispatcher = Dispatcher(manager, [provider], reconciled=reconciled)
            agent = await db.agents.create_agent(
                name="helper",
                driver_type="inprocess",
                model_id=model_id,
                workspace=str(tmp_path / "ws"),
            )
            session = await db.agents.create_session(agent.id, settings=settings)
            try:
                yield Stack(db, host, dispatcher, f"agent-session:{session.id}")
            finally:
                await host.aclose()
                with anyio.fail_after(5):
                    await manager.shutdown()


def _text(parts: list[dict[str, object]]) -> str:
    return "".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")


def _said(text: str) -> list[dict[str, object]]:
    return [{"type": "text", "text": text}]


async def test_a_steer_mid_turn_persists_u1_a1a_u2_a2_in_order(
    tmp_path: Path, target: Target
) -> None:
    """Scenario 31 with a real driver: the roll, on SQLite and on PostgreSQL."""
    gate = Gate()
    model_id = script_model(
        [
            [Text("Looking at the workspace."), Pause(1), ToolCall("list_dir", {})],
            [Echo(prefix="Answering: ")],
        ]
    )
    async with stack_for(tmp_path, model_id, Models(sleep=gate), database=target) as st:
        (tmp_path / "ws").mkdir(exist_ok=True)
        (tmp_path / "ws" / "notes.txt").write_text("n")
        watcher = RecordingListener("watcher")
        with anyio.fail_after(10):
            first = await st.dispatcher.dispatch(
                Submit(conversation_id=st.conversation_id, parts=_said("tidy the workspace")),
                [watcher],
            )
            await gate.reached.wait()  # the model is mid-step: the turn is live
            steer = await st.dispatcher.dispatch(
                Submit(conversation_id=st.conversation_id, parts=_said("and sort the notes"))
            )
            gate.released.set()
            await watcher.wait_done()
            await st.settled()
        rows = await st.db.messages.list_for_conversation(st.conversation_id)

    assert steer.mode == "injected"
    u1, a1a, u2, a2 = _by_chain(rows)
    assert [r.role for r in (u1, a1a, u2, a2)] == ["user", "assistant", "user", "assistant"]
    assert [r.id for r in rows] == [u1.id, a1a.id, u2.id, a2.id]  # oldest first
    assert u1.id == first.user_message_id and u2.id == steer.user_message_id
    assert [r.status for r in (u1, a1a, u2, a2)] == ["success"] * 4
    assert (a1a.parent_id, u2.parent_id, a2.parent_id) == (u1.id, a1a.id, u2.id)
    # A1a: the first step (text, the tool call and its output), nothing after the boundary
    assert _text(a1a.parts) == "Looking at the workspace."
    tools = [p for p in a1a.parts if p.get("type") == "tool-list_dir"]
    assert len(tools) == 1 and tools[0]["state"] == "output-available"
    # A2 continues after the steer: the model saw it as a system reminder
    answer = _text(a2.parts)
    assert "Answering: <system-reminder>" in answer and "and sort the notes" in answer
    assert "tidy the workspace" not in answer
    # U2 is the steer row; the resume token follows the runtime onto every assistant row
    assert _text(u2.parts) == "and sort the notes"
    # (A1a persists concurrently with A2's start: it may already see the steer's token)
    assert a1a.runtime_resume_token in (u1.id, u2.id)
    assert a2.runtime_resume_token == u2.id
    # the watcher of the first turn saw one conversation: both rows, and one end
    assert watcher.statuses()[-1] == "success"


def _by_chain(rows: list[MessageRecord]) -> list[MessageRecord]:
    """The conversation's rows following the parent chain from the root (a single path)."""
    children: dict[str | None, list[MessageRecord]] = {}
    for row in rows:
        children.setdefault(row.parent_id, []).append(row)
    chain: list[MessageRecord] = []
    parent: str | None = None
    while children.get(parent):
        (row,) = children[parent]
        chain.append(row)
        parent = row.id
    assert len(chain) == len(rows), [(r.id, r.parent_id, r.role) for r in rows]
    return chain


async def _approval_turn(tmp_path: Path, approved: bool) -> tuple[Watcher, list[MessageRecord]]:
    model_id = script_model(
        [[ToolCall("shell", {"command": "echo made > made.txt"}, "call-sh")], [Text("Over.")]]
    )
    async with stack_for(tmp_path, model_id, Models(), settings={"shell": True}) as st:
        watcher = Watcher()
        with anyio.fail_after(10):
            await st.dispatcher.dispatch(
                Submit(conversation_id=st.conversation_id, parts=_said("make it")), [watcher]
            )
            request = await watcher.first("tool-approval-request")
            assert not (tmp_path / "ws" / "made.txt").exists()
            assert await st.host.respond_approval(
                st.session_id, request["approvalId"], approved=approved, reason="not now"
            )
            await watcher.wait_done()
            await st.settled()
        rows = await st.db.messages.list_for_conversation(st.conversation_id)
    return watcher, rows


async def test_an_approval_through_the_host_runs_the_call_in_place(tmp_path: Path) -> None:
    watcher, rows = await _approval_turn(tmp_path, approved=True)
    assert (tmp_path / "ws" / "made.txt").read_text() == "made\n"
    kinds = [c["type"] for c in watcher.chunks()]
    assert kinds.count("tool-approval-request") == 1
    assert kinds.index("tool-approval-request") < kinds.index("tool-output-available")
    user_row, answer = rows
    assert user_row.role == "user"
    assert answer.status == "success" and _text(answer.parts) == "Over."
    tool = next(p for p in answer.parts if p.get("type") == "tool-shell")
    assert tool["state"] == "output-available" and tool["output"]["exit_code"] == 0


async def test_a_denial_through_the_host_is_one_tool_output_denied(tmp_path: Path) -> None:
    watcher, rows = await _approval_turn(tmp_path, approved=False)
    assert not (tmp_path / "ws" / "made.txt").exists()
    kinds = [c["type"] for c in watcher.chunks()]
    assert kinds.count("tool-approval-request") == 1 and kinds.count("tool-output-denied") == 1
    user_row, answer = rows
    assert user_row.role == "user"
    assert answer.status == "success" and _text(answer.parts) == "Over."
    tool = next(p for p in answer.parts if p.get("type") == "tool-shell")
    assert tool["state"] == "output-denied"


async def test_a_steer_the_last_step_missed_is_requeued_as_a_steer_turn(tmp_path: Path) -> None:
    """Scenario 30 with a real driver: redirected, never injected, back as a steer turn."""
    gate = Gate()
    model_id = script_model([[Pause(1), Echo(prefix="Re: ")]])
    async with stack_for(tmp_path, model_id, Models(sleep=gate)) as st:
        watcher = Watcher()
        with anyio.fail_after(10):
            await st.dispatcher.dispatch(
                Submit(conversation_id=st.conversation_id, parts=_said("first question")),
                [watcher],
            )
            await gate.reached.wait()
            steer = await st.dispatcher.dispatch(
                Submit(conversation_id=st.conversation_id, parts=_said("second thought"))
            )
            gate.released.set()
            await watcher.wait_done()
            await st.settled()
        rows = await st.db.messages.list_for_conversation(st.conversation_id)

    assert steer.mode == "injected"
    _, a1, u2, a2 = _by_chain(rows)
    assert [r.status for r in (a1, a2)] == ["success", "success"]
    assert _text(a1.parts) == "Re: first question"
    # the runtime never injected it: it came back and ran as its own turn, still as a steer
    assert u2.id == steer.user_message_id
    assert _text(a2.parts).startswith("Re: <system-reminder>")
    assert "second thought" in _text(a2.parts)


async def test_stop_closes_the_connection_and_the_next_turn_connects_cold(
    tmp_path: Path,
) -> None:
    gate = Gate()
    model_id = script_model([[Text("Partial."), Pause(1), Text(" never sent")]])
    async with stack_for(tmp_path, model_id, Models(sleep=gate)) as st:
        watcher = Watcher()
        with anyio.fail_after(10):
            await st.dispatcher.dispatch(
                Submit(conversation_id=st.conversation_id, parts=_said("start")), [watcher]
            )
            await gate.reached.wait()
            await watcher.first("text-delta")  # the host has routed the partial text
            first_link = st.host.connections.current(st.host.entries[st.session_id])
            assert await st.host.stop(st.session_id)
            await st.settled()
            assert st.host.connections.current(st.host.entries[st.session_id]) is None
            gate.released.set()
            later = Watcher()
            await st.dispatcher.dispatch(
                Submit(conversation_id=st.conversation_id, parts=_said("again")), [later]
            )
            await later.wait_done()
            await st.settled()
            second_link = st.host.connections.current(st.host.entries[st.session_id])
        rows = await st.db.messages.list_for_conversation(st.conversation_id)

    assert first_link is not None and second_link is not None and first_link is not second_link
    u1, a1, u2, a2 = _by_chain(rows)
    assert (a1.status, _text(a1.parts)) == ("paused", "Partial.")
    assert (a2.status, _text(a2.parts)) == ("success", "Partial. never sent")
    # the cold connect loaded the stored history (the stopped turn included), once
    assert isinstance(second_link, InProcessConnection)
    assert [m["id"] for m in second_link.history] == [
        u1.id,
        a1.id,
        u2.id,
        second_link.history[-1]["id"],
    ]


async def test_a_failed_turn_stores_its_resume_token_on_the_error_row(tmp_path: Path) -> None:
    """Scenario 35 with a real driver (first half): the error row keeps the token."""
    model_id = script_model([[Fail(400)]])
    async with stack_for(tmp_path, model_id, Models()) as st:
        watcher = Watcher()
        with anyio.fail_after(10):
            await st.dispatcher.dispatch(
                Submit(conversation_id=st.conversation_id, parts=_said("fail please")), [watcher]
            )
            await watcher.wait_done()
            await st.settled()
        rows = await st.db.messages.list_for_conversation(st.conversation_id)
        latest = await st.db.agents.latest_resume_token(st.session_id)

    user_row, answer = _by_chain(rows)
    assert answer.status == "error"
    assert answer.runtime_resume_token == user_row.id == latest
