"""``InProcessDriver``: agent sessions run by Drupe's own agent loop (driver type ``inprocess``).

The driver is an async context manager that owns a task group: every turn of every connection
runs as a task in it, so a turn outlives the ``send`` call without a bare task. Enter it once in
the composition root and register it explicitly::

    async with InProcessDriver(resolve_model=lambda m: models.resolve(m).model,
                               load_history=store.session_history) as driver:
        registry.register(driver)

Collaborators are injected: ``resolve_model`` (model id -> pydantic-ai ``Model``),
``load_history`` (session id -> the session's persisted UI messages, oldest first) and,
optionally, ``context_window`` (model id -> its window, for ``context_usage``). The driver never
imports persistence.

* ``validate_session``: the session needs a workspace directory that exists or can be created
  (it is created); otherwise ``ValidationError``.
* ``connect``: checks the model resolves (else ``DriverError``), loads the history once (a cold
  connect; the resume token is only the id of the last user message the runtime saw, so a token
  missing from the history is logged, not fatal) and returns an ``InProcessConnection``.
* Approval chunks: the host emits them from the ``ToolApprovalRequest`` event (see
  ``connection``); ``emit_approval_chunks=True`` makes the driver emit them itself.
* Tools: the workspace tools (``workspace_tools``). The session's ``tools`` selection, when not
  empty, filters them by name; ``settings["shell"]`` turns the shell on (approval-gated unless the
  permission mode is ``bypass``; ``settings["shell_timeout_s"]`` bounds it); permission mode
  ``plan`` keeps only the reading tools. MCP servers are not offered by this runtime.
  ``extra_tools`` (the composition root's: remote A2A agents, ``drupe.tools.a2a``) are offered
  only to a session whose ``tools`` selection names them, never in ``plan`` mode.

Must never: register itself, or touch files outside a session's workspace through its tools.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from drupe.agent.runner import AgentRunner
from drupe.chunks.types import UIMessage
from drupe.errors import DriverError, UsageError, ValidationError
from drupe.lifetimes import TaskOwner
from drupe.sessions.drivers.base import Capabilities, ConnectInput, ConnectTarget, SessionInfo
from drupe.sessions.drivers.inprocess.connection import InProcessConnection
from drupe.sessions.drivers.inprocess.workspace_tools import (
    WorkspaceToolOptions,
    workspace_tools,
)
from drupe.tools.base import ToolEntry

if TYPE_CHECKING:
    from pydantic_ai.models import Model

__all__ = ["InProcessDriver", "LoadHistory", "ensure_workspace", "session_tools"]

log = logging.getLogger(__name__)

LoadHistory = Callable[[str], Awaitable[list[UIMessage]]]


def ensure_workspace(session: SessionInfo) -> Path:
    """Return the session's workspace, creating it; ``ValidationError`` when impossible."""
    workspace = session.workspace
    if workspace is None:
        raise ValidationError("an inprocess agent session needs a workspace directory")
    if workspace.exists() and not workspace.is_dir():
        raise ValidationError(f"the workspace {workspace} is not a directory")
    try:
        workspace.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValidationError(f"the workspace {workspace} cannot be created: {exc}") from exc
    return workspace


def session_tools(
    workspace: Path,
    settings: Mapping[str, Any],
    target: ConnectTarget,
    extra: Sequence[ToolEntry] = (),
) -> list[ToolEntry]:
    """The tools a turn with ``target`` gets in ``workspace`` (rules in the module docstring)."""
    options = WorkspaceToolOptions(
        shell=bool(settings.get("shell", False)),
        shell_needs_approval=target.permission_mode != "bypass",
        shell_timeout_s=float(settings.get("shell_timeout_s", 30.0)),
        read_only=target.permission_mode == "plan",
    )
    entries = workspace_tools(workspace, options)
    if target.tools:
        wanted = set(target.tools)
        entries = [entry for entry in entries if entry.name in wanted]
        if not options.read_only:
            entries += [entry for entry in extra if entry.name in wanted]
    return entries


class InProcessDriver(TaskOwner):
    """The ``inprocess`` driver (see the module docstring)."""

    capabilities = Capabilities(steer=True, context_usage=True, headless_runs=True)
    """Runs without a human (scheduled tasks, heartbeats): approvals are denied at once."""

    def __init__(
        self,
        *,
        resolve_model: Callable[[str], Model],
        load_history: LoadHistory,
        runner: AgentRunner | None = None,
        close_timeout_s: float = 5.0,
        emit_approval_chunks: bool = False,
        context_window: Callable[[str], int | None] | None = None,
        extra_tools: Sequence[ToolEntry] = (),
    ) -> None:
        self.type = "inprocess"
        self._extra_tools = tuple(extra_tools)
        self._emit_approval_chunks = emit_approval_chunks
        self._context_window = context_window
        self._resolve_model = resolve_model
        self._load_history = load_history
        self._runner = runner or AgentRunner(resolve_model)
        self._close_timeout_s = close_timeout_s
        self._connections: set[InProcessConnection] = set()

    async def _start_tasks(self, group: anyio.abc.TaskGroup) -> None:
        return None  # connections start their tasks as they connect

    async def _before_cancel(self) -> None:
        with anyio.CancelScope(shield=True):
            for connection in list(self._connections):
                await connection.close()

    def validate_session(self, session: SessionInfo) -> None:
        ensure_workspace(session)

    def check_model(self, model_id: str) -> None:
        """Raise when ``model_id`` cannot be resolved."""
        self._resolve_model(model_id)

    async def connect(self, connect_input: ConnectInput) -> InProcessConnection:
        if self._owned_group is None:
            raise UsageError("InProcessDriver must be entered (async with) before connecting")
        session = connect_input.session
        try:
            workspace = ensure_workspace(session)
        except ValidationError as exc:
            raise DriverError(str(exc)) from exc
        try:
            self.check_model(connect_input.model_id)
        except Exception as exc:
            raise DriverError(f"model {connect_input.model_id!r} cannot be used: {exc}") from exc
        try:
            history = list(await self._load_history(session.session_id))
        except Exception as exc:
            raise DriverError(f"loading the history of {session.session_id!r} failed") from exc
        token = connect_input.resume_token
        if token is not None and all(message.get("id") != token for message in history):
            log.warning(
                "in-process resume token %r of session %r is not in its history; the history wins",
                token,
                session.session_id,
            )
        target = ConnectTarget.of(session)
        if target.model_id != connect_input.model_id:
            target = ConnectTarget(
                model_id=connect_input.model_id,
                instructions=target.instructions,
                tools=target.tools,
                mcp_servers=target.mcp_servers,
                permission_mode=target.permission_mode,
            )
        settings = dict(session.settings)
        connection = InProcessConnection(
            runner=self._runner,
            session_id=session.session_id,
            target=target,
            history=history,
            build_tools=lambda t: session_tools(workspace, settings, t, self._extra_tools),
            check_model=self.check_model,
            task_group=self._owned_group,
            resume_token=token,
            request_options=settings,
            close_timeout_s=self._close_timeout_s,
            on_close=self._connections.discard,
            emit_approval_chunks=self._emit_approval_chunks,
            context_window=self._context_window,
        )
        self._connections.add(connection)
        return connection
