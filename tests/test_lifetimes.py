"""``TaskOwner`` (``drupe.lifetimes``): the one enter/cancel/shield order of every task owner.

* The order on exit: ``_before_cancel`` while the tasks still run, then the tasks are
  cancelled and awaited, then ``_after_tasks`` once none runs — also when the caller is being
  cancelled, and when ``_before_cancel`` raises.
* A failing ``_start_tasks`` leaves no task behind.
* No module of Drupe hand-writes the enter/exit pair again: every class that opens a task
  group in ``__aenter__`` does it through ``TaskOwner`` (a source scan of ``src/drupe``).
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

import drupe
from drupe.channels.service import ChannelService
from drupe.cluster.command_bus import CommandBus
from drupe.cluster.log_writer import LogWriter
from drupe.cluster.ownership import LeaseOwnership
from drupe.cluster.reader import NodeReader
from drupe.cluster.router import ClusterRouter
from drupe.cluster.status import ClusterStatus
from drupe.cluster.takeover import Takeover
from drupe.http.ping_ticker import PingTicker
from drupe.lifetimes import TaskOwner
from drupe.observability.trace_store import TraceRecorder
from drupe.sessions.drivers.claude_code.driver import ClaudeCodeDriver
from drupe.sessions.drivers.inprocess.driver import InProcessDriver
from drupe.streaming.checkpoints import Checkpointer
from drupe.streaming.manager import StreamManager
from drupe.streaming.terminal_writes import TerminalWriteRetrier
from drupe.tasks.service import TaskService
from drupe.tools.mcp.catalog import McpCatalog


class Recorder(TaskOwner):
    def __init__(self, *, fail_before: bool = False) -> None:
        self.events: list[str] = []
        self.fail_before = fail_before

    async def _start_tasks(self, group: anyio.abc.TaskGroup) -> None:
        group.start_soon(self._work)

    async def _work(self) -> None:
        self.events.append("task started")
        try:
            await anyio.sleep_forever()
        finally:
            self.events.append("task cancelled")

    async def _before_cancel(self) -> None:
        await anyio.lowlevel.checkpoint()
        self.events.append("before cancel")
        if self.fail_before:
            raise RuntimeError("drain failed")

    async def _after_tasks(self) -> None:
        await anyio.lowlevel.checkpoint()  # would raise if the caller's cancellation reached it
        self.events.append("after tasks")


async def test_exit_runs_before_cancel_then_cancels_the_tasks_then_cleans_up() -> None:
    owner = Recorder()
    async with owner:
        await anyio.sleep(0.01)
    assert owner.events == ["task started", "before cancel", "task cancelled", "after tasks"]


async def test_the_order_holds_when_the_caller_is_cancelled_and_when_before_cancel_raises() -> None:
    owner = Recorder()
    with anyio.CancelScope() as scope:
        async with owner:
            await anyio.sleep(0.01)
            scope.cancel()
            await anyio.sleep(1)
    assert owner.events[-2:] == ["task cancelled", "after tasks"]
    failing = Recorder(fail_before=True)
    with pytest.raises(RuntimeError, match="drain failed"):
        async with failing:
            await anyio.sleep(0.01)
    assert failing.events == ["task started", "before cancel", "task cancelled", "after tasks"]


async def test_a_failing_start_leaves_no_task_behind() -> None:
    class Broken(Recorder):
        async def _start_tasks(self, group: anyio.abc.TaskGroup) -> None:
            group.start_soon(self._work)
            await anyio.sleep(0.01)
            raise ValueError("cannot start")

    owner = Broken()
    with pytest.raises(ValueError, match="cannot start"):
        async with owner:
            pass
    assert owner.events == ["task started", "task cancelled"]
    with pytest.raises(RuntimeError, match="not entered"):
        _ = owner.task_group


OWNERS = [
    Checkpointer,
    ClaudeCodeDriver,
    InProcessDriver,
    McpCatalog,
    TerminalWriteRetrier,
    ChannelService,
    ClusterRouter,
    ClusterStatus,
    CommandBus,
    LeaseOwnership,
    LogWriter,
    NodeReader,
    PingTicker,
    StreamManager,
    Takeover,
    TaskService,
    TraceRecorder,
]


def test_every_task_owner_of_drupe_uses_the_one_helper() -> None:
    hand_written: list[str] = []
    root = Path(inspect.getfile(drupe)).parent
    for path in sorted(root.rglob("*.py")):
        if path.name == "lifetimes.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.AsyncFunctionDef) and node.name == "__aenter__":
                source = ast.unparse(node)
                if "create_task_group" in source:
                    hand_written.append(f"{path.relative_to(root)}:{node.lineno}")
    assert hand_written == []
    for owner in OWNERS:
        assert issubclass(owner, TaskOwner), owner
        assert "__aexit__" not in vars(owner) and "__aenter__" not in vars(owner), owner
