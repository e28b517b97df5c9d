"""``ClaudeCodeDriver``: agent sessions run by the Claude Code CLI (``claude-agent-sdk``).

The driver is an async context manager that owns a task group: every connection's owning task
(``ClaudeCodeConnection.run``) runs in it, so a connection outlives the ``connect`` call without
a bare task. Enter it once in the composition root::

    async with ClaudeCodeDriver(ClaudeCodeConfig(env={...})) as driver:
        registry.register(driver)

``connect`` spawns the CLI (``ClaudeSDKClient`` in streaming-input mode, partial messages on,
``cwd`` = the session's workspace, ``resume`` = the resume token when there is one, never
``continue_conversation``) and returns once the CLI answered its handshake; a failure raises
``DriverError``. Options are built by the pure ``build_options``. ``validate_session`` checks
that the workspace exists or can be created. ``on_session_idle`` prewarms a CLI that resumes the
session; the next ``connect`` with the same settings consumes it (``warm.WarmPool``).

Importing this module (or the package) does not import ``claude_agent_sdk``, which pulls in the
MCP SDK and costs about a second: the SDK is imported by the first ``connect`` (or
``build_options``), so a server whose users never start a Claude Code session never pays for it.

Must never: read or write the user's real ``~/.claude`` on its own (configuration comes only
from ``ClaudeCodeConfig``: ``env``, ``cli_path``, ``setting_sources``), or register itself.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from anyio.abc import TaskStatus

from drupe.errors import DriverError, UsageError, ValidationError
from drupe.lifetimes import TaskOwner
from drupe.sessions.drivers.base import Capabilities, ConnectInput, ConnectTarget, SessionInfo
from drupe.sessions.drivers.claude_code.content import sdk_permission_mode
from drupe.sessions.drivers.claude_code.warm import WarmPool, signature
from drupe.tools.mcp.config import McpServerConfig

if TYPE_CHECKING:
    from claude_agent_sdk import ClaudeAgentOptions

    from drupe.sessions.drivers.claude_code.connection import ClaudeCodeConnection

__all__ = ["ClaudeCodeConfig", "ClaudeCodeDriver", "build_options", "sdk_mcp_server"]

log = logging.getLogger(__name__)

MAX_LATEST = 1024
"""Sessions whose newest connect the driver remembers for the idle prewarm."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaudeCodeConfig:
    """How the driver runs the CLI (the same for every session)."""

    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment for the CLI: ``ANTHROPIC_BASE_URL``, ``ANTHROPIC_API_KEY``, ``HOME``,
    ``CLAUDE_CONFIG_DIR``, ``CLAUDE_CODE_TMPDIR``, ... (tests point it at a fake API)."""
    cli_path: Path | None = None
    """None: the CLI bundled with ``claude-agent-sdk``."""
    claude_code_prompt: bool = True
    """Use Claude Code's own system prompt (the agent's instructions are appended)."""
    setting_sources: Sequence[str] = ()
    """Which settings files the CLI may load (``user``, ``project``, ``local``); none by
    default, so a session only sees what Drupe configured."""
    max_turns: int | None = None
    mcp_servers: Mapping[str, McpServerConfig] = field(default_factory=dict)
    """Drupe's MCP servers by id; a session's ``mcp_servers`` selection picks from these."""
    prewarm: bool = True
    """On ``on_session_idle``, start a CLI for the session's next turn (consumed at most once)."""
    warm_ttl_s: float = 300.0
    connect_timeout_s: float = 60.0
    close_timeout_s: float = 10.0
    interrupt_timeout_s: float = 3.0
    """Stop: how long the interrupt of a running turn may take to settle before the close."""
    exit_grace_s: float = 2.0
    """After stdin EOF: SIGTERM when the CLI has not exited after this, SIGKILL after twice."""
    extra_args: Mapping[str, str | None] = field(default_factory=dict)


def _env(config: ClaudeCodeConfig, connect_input: ConnectInput) -> dict[str, str]:
    """The CLI's environment: the configured one, plus the W3C ``TRACEPARENT`` of the session's
    trace (the CLI parents its own spans under it when its telemetry is enabled)."""
    env = dict(config.env)
    trace = connect_input.trace
    if trace is not None and trace.traceparent and "TRACEPARENT" not in env:
        env["TRACEPARENT"] = trace.traceparent
    return env


def build_options(
    config: ClaudeCodeConfig, connect_input: ConnectInput, workspace: Path
) -> ClaudeAgentOptions:
    """The SDK options of one connection (hooks and ``can_use_tool`` are added by it)."""
    from claude_agent_sdk import ClaudeAgentOptions  # the SDK (and MCP) on the first connect

    session = connect_input.session
    system_prompt: Any
    if config.claude_code_prompt:
        system_prompt = {"type": "preset", "preset": "claude_code"}
        if session.instructions:
            system_prompt["append"] = session.instructions
    else:
        system_prompt = session.instructions or ""
    options = ClaudeAgentOptions(
        cwd=workspace,
        model=connect_input.model_id,
        resume=connect_input.resume_token or None,
        continue_conversation=False,
        include_partial_messages=True,
        system_prompt=system_prompt,
        permission_mode=sdk_permission_mode(session.permission_mode),
        env=_env(config, connect_input),
        setting_sources=list(config.setting_sources),  # type: ignore[arg-type]
        max_turns=config.max_turns,
        extra_args=dict(config.extra_args),
    )
    if config.cli_path is not None:
        options.cli_path = config.cli_path
    if session.tools:
        options.tools = list(session.tools)
    if session.mcp_servers:
        servers: dict[str, Any] = {
            server_id: sdk_mcp_server(config.mcp_servers[server_id])
            for server_id in session.mcp_servers
        }
        options.mcp_servers = servers
    return options


def sdk_mcp_server(server: McpServerConfig) -> dict[str, Any]:
    """Drupe's MCP server config as the CLI's (stdio: command/args/env; http: url/headers)."""
    if server.transport == "http":
        return {"type": "http", "url": server.url, "headers": dict(server.headers)}
    return {
        "type": "stdio",
        "command": server.command,
        "args": list(server.args),
        "env": dict(server.env),
    }


def _workspace_problem(workspace: Path | None) -> str | None:
    if workspace is None:
        return "a claude-code session needs a workspace directory"
    if workspace.exists():
        return None if workspace.is_dir() else f"the workspace {workspace} is not a directory"
    parent = workspace.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        return f"the workspace {workspace} cannot be created (no writable parent)"
    return None


class ClaudeCodeDriver(TaskOwner):
    """The ``claude-code`` driver (see the module docstring)."""

    capabilities = Capabilities(steer=True, context_usage=True, headless_runs=True, idle_hook=True)
    """Runs without a human (scheduled tasks, heartbeats): approvals are denied at once."""

    def __init__(self, config: ClaudeCodeConfig | None = None) -> None:
        self.type = "claude-code"
        self.config = config or ClaudeCodeConfig()
        self._connections: set[ClaudeCodeConnection] = set()
        self._latest: OrderedDict[str, tuple[ConnectInput, ClaudeCodeConnection]] = OrderedDict()
        """The newest connect per session, for the idle prewarm: at most ``MAX_LATEST``
        (least recently connected dropped first: that session is simply not prewarmed)."""
        self._warm = WarmPool(ttl_s=self.config.warm_ttl_s)
        self._fingerprint = {
            "env": dict(self.config.env),
            "cli_path": str(self.config.cli_path),
            "claude_code_prompt": self.config.claude_code_prompt,
            "setting_sources": list(self.config.setting_sources),
            "max_turns": self.config.max_turns,
            "extra_args": dict(self.config.extra_args),
            "mcp_servers": {k: repr(v) for k, v in self.config.mcp_servers.items()},
        }

    async def _start_tasks(self, group: anyio.abc.TaskGroup) -> None:
        return None  # connections start their tasks as they connect

    async def _before_cancel(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._warm.close_all()
            for connection in list(self._connections):
                await connection.close()

    def validate_session(self, session: SessionInfo) -> None:
        problem = _workspace_problem(session.workspace)
        if problem is not None:
            raise ValidationError(problem)
        unknown = [s for s in session.mcp_servers if s not in self.config.mcp_servers]
        if unknown:
            raise ValidationError(f"unknown MCP servers for claude-code: {unknown!r}")

    async def connect(self, connect_input: ConnectInput) -> ClaudeCodeConnection:
        if self._owned_group is None:
            raise UsageError("ClaudeCodeDriver must be entered (async with) before connecting")
        session_id = connect_input.session.session_id
        warm = await self._warm.consume(session_id, signature(connect_input, self._fingerprint))
        connection = warm or await self._spawn(connect_input)
        self._latest.pop(session_id, None)
        self._latest[session_id] = (connect_input, connection)
        while len(self._latest) > MAX_LATEST:
            dropped, _ = self._latest.popitem(last=False)
            log.info(
                "no prewarm for session %r any more (the driver keeps %d)", dropped, MAX_LATEST
            )
        return connection

    async def on_session_idle(self, session_id: str) -> None:
        """The host closed an idle session: prewarm a CLI that resumes it (when enabled)."""
        latest = self._latest.pop(session_id, None)
        if not self.config.prewarm or self._owned_group is None or latest is None:
            return
        last_input, last_connection = latest
        token = last_connection.translator.resume_token or last_input.resume_token
        if token is None:
            return
        warm_input = replace(last_input, resume_token=token, trace=None)
        sig = signature(warm_input, self._fingerprint)
        if self._warm.refresh(session_id, sig, self._owned_group):
            return
        try:
            connection = await self._spawn(warm_input)
        except DriverError as exc:
            log.warning("prewarming a Claude Code session failed: %s", exc)
            return
        await self._warm.park(session_id, sig, connection, self._owned_group)

    def is_warm(self, session_id: str) -> bool:
        return session_id in self._warm

    async def _spawn(self, connect_input: ConnectInput) -> ClaudeCodeConnection:
        assert self._owned_group is not None
        session = connect_input.session
        self.validate_session(session)
        assert session.workspace is not None
        try:
            session.workspace.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DriverError(f"cannot create the workspace {session.workspace}: {exc}") from exc
        target = replace(ConnectTarget.of(session), model_id=connect_input.model_id)
        from drupe.sessions.drivers.claude_code.connection import ClaudeCodeConnection

        connection = ClaudeCodeConnection(
            options=build_options(self.config, connect_input, session.workspace),
            target=target,
            resume_token=connect_input.resume_token,
            close_timeout_s=self.config.close_timeout_s,
            interrupt_timeout_s=self.config.interrupt_timeout_s,
            exit_grace_s=self.config.exit_grace_s,
        )
        with anyio.fail_after(self.config.connect_timeout_s):
            await self._owned_group.start(self._own, connection)
        return connection

    async def _own(
        self,
        connection: ClaudeCodeConnection,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        self._connections.add(connection)
        try:
            await connection.run(task_status=task_status)
        finally:
            self._connections.discard(connection)
