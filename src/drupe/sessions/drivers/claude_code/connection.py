"""``ClaudeCodeConnection``: one live Claude Code CLI process for one agent session.

Ownership: ONE owning task (``run``, started in the driver's task group) enters the
``ClaudeSDKClient``, reads its messages, and performs every client call (``query``,
``set_model``, ``set_permission_mode``) from a command stream; it exits the client exactly once.
No other task touches the client (the SDK's internal task group is bound to the task that
connected it). ``events()`` yields the runtime events the owner puts into its bounded
``EventOutbox`` (an overflow ends the connection with an error), and ends when the connection
is closed or the CLI goes away. Client calls go through ``ClientCommands`` (bounded,
``client_commands.py``); stopping the process is ``cli_process.py``.

Steering goes through the connection's ``SteerHolder`` (``redirect`` stashes, the ``PreToolUse``
hook injects). Approvals: the SDK's ``can_use_tool`` callback registers a pending decision here,
emits the ``tool-approval-request`` event (the host makes the UI chunks) and waits for
``respond_approval``; a denial answers ``PermissionResultDeny(message=reason)``; a
headless turn is denied at once.

A turn that ends in ``error`` (including a result flagged ``is_error``) tears the process down:
the error event is the last event, then ``events()`` ends.

Must never: close itself from ``reconcile``, raise from ``close``, or let an error escape the
owning task once the connection is up (it becomes an ``error`` event and the end of events).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import anyio
from anyio.abc import Process, TaskStatus
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    PermissionResultAllow,
    PermissionResultDeny,
    ToolPermissionContext,
)

from drupe.errors import DriverError
from drupe.sessions.drivers.approvals import PendingApprovals
from drupe.sessions.drivers.base import (
    ApprovalRequest,
    ChunkEvent,
    ConnectTarget,
    ErrorEvent,
    ReconcileVerdict,
    RuntimeEvent,
    ToolApprovalRequest,
    UserInput,
)
from drupe.sessions.drivers.claude_code.cli_process import disconnect, process_of
from drupe.sessions.drivers.claude_code.client_commands import ClientCall, ClientCommands
from drupe.sessions.drivers.claude_code.content import sdk_permission_mode, user_content
from drupe.sessions.drivers.claude_code.events import Translator
from drupe.sessions.drivers.claude_code.steer import SteerHolder
from drupe.sessions.drivers.outbox import EventOutbox

__all__ = ["ClaudeCodeConnection"]

log = logging.getLogger(__name__)

_TOOL_READY_TIMEOUT_S = 5.0
_CONTEXT_USAGE_TIMEOUT_S = 5.0
_HEADLESS_DENIAL = "No one can approve tool calls in this turn (it runs headless)."


class ClaudeCodeConnection:
    """A live CLI process for one session (see the module docstring for the ownership rules)."""

    def __init__(
        self,
        *,
        options: ClaudeAgentOptions,
        target: ConnectTarget,
        resume_token: str | None,
        close_timeout_s: float = 10.0,
        interrupt_timeout_s: float = 3.0,
        exit_grace_s: float = 2.0,
    ) -> None:
        self.steers = SteerHolder()
        self.translator = Translator(
            self.steers, model_id=target.model_id, resume_token=resume_token
        )
        self.frozen = target
        """The configuration the CLI was spawned with; hot patches update it."""
        self._close_timeout_s = close_timeout_s
        self._interrupt_timeout_s = interrupt_timeout_s
        self._exit_grace_s = exit_grace_s
        self._turn_changed = anyio.Event()
        self.process: Process | None = None
        """The CLI process (set once connected; for the escalation and for tests)."""
        options.can_use_tool = self._can_use_tool
        hooks = dict(options.hooks or {})
        hooks["PreToolUse"] = [
            *hooks.get("PreToolUse", []),
            HookMatcher(hooks=[self.steers.pre_tool_use_hook]),  # type: ignore[list-item]
        ]
        options.hooks = hooks
        self._options = options
        self._outbox = EventOutbox()
        self._commands = ClientCommands()
        self._approvals = PendingApprovals()
        self._tools_seen: dict[str, anyio.Event] = {}
        self._headless = False
        self._closing = False
        self._finished = anyio.Event()
        self._stop = anyio.Event()
        self._reconcile_lock = anyio.Lock()

    # -- the owning task --------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Own the SDK client: connect, report ``started``, pump messages and commands, exit.

        Raises ``DriverError`` only before ``started`` (the spawn or handshake failed); after
        that every failure becomes events and the end of ``events()``.
        """
        client = ClaudeSDKClient(self._options)
        try:
            await client.connect()
        except Exception as exc:
            self._finish()
            raise DriverError(f"the Claude Code CLI did not start: {exc}") from exc
        self.process = process_of(client)
        try:
            task_status.started()
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._commands.serve, client)
                tg.start_soon(self._pump, client)
                await self._stop.wait()
                tg.cancel_scope.cancel()
        finally:
            self._closing = True
            with anyio.CancelScope(shield=True):
                await disconnect(client, self.process, self._exit_grace_s)
                self._finish()

    def _finish(self) -> None:
        self._closing = True
        self._turn_changed.set()
        self._approvals.deny_all("the connection closed")
        self._commands.close()
        self._outbox.close()
        self._finished.set()

    async def _pump(self, client: ClaudeSDKClient) -> None:
        try:
            async for message in client.receive_messages():
                events = self.translator.feed(message)
                # Context usage is fetched only on request (``context_usage``): each fetch
                # makes the CLI send a burst of ``count_tokens`` requests to the provider.
                self._emit_all(events)
                if not self.translator.turn_active:
                    self._turn_changed.set()
                for call_id in self.translator.available:
                    self._tool_event(call_id).set()
                if any(isinstance(e, ErrorEvent) for e in events):
                    # A failed turn tears the process down (reference §6.8); the next turn
                    # reconnects and resumes by token.
                    self._closing = True
                    break
            if not self._closing:
                error = {"name": "DriverError", "message": "the Claude Code CLI exited"}
                self._emit_all(self.translator.abandon_turn(error))
        except Exception as exc:
            log.warning("claude-code connection failed: %s", exc)
            error = {"name": type(exc).__name__, "message": str(exc)}
            self._emit_all(self.translator.abandon_turn(error))
        finally:
            self._stop.set()

    async def _call(self, call: ClientCall) -> None:
        """Run ``call`` on the owning task and wait for it; raises what it raised."""
        if self._closing:
            raise DriverError("the Claude Code connection is closed")
        await self._commands.call(call)

    def _emit_all(self, events: list[RuntimeEvent]) -> None:
        for event in events:
            if not self._outbox.put(event):
                if self._outbox.overflowed:
                    self._stop.set()  # the host read too slowly: this connection ends
                return

    def _tool_event(self, call_id: str) -> anyio.Event:
        event = self._tools_seen.get(call_id)
        if event is None:
            event = self._tools_seen[call_id] = anyio.Event()
        return event

    @property
    def alive(self) -> bool:
        """Whether the CLI process is up and the connection not closing."""
        return not self._closing and not self._finished.is_set()

    # -- Connection -------------------------------------------------------------------------

    async def events(self) -> AsyncIterator[RuntimeEvent]:
        async for event in self._outbox.events():
            yield event

    async def send(self, user_input: UserInput) -> None:
        if self._closing:
            raise DriverError("the Claude Code connection is closed")
        if self.translator.turn_active:
            raise DriverError("a turn is already running on this connection (steer or queue)")
        user_uuid = str(uuid.uuid4())
        self.translator.begin_turn(user_uuid)
        self.steers.begin_turn()
        self._headless = user_input.headless
        self._tools_seen.clear()
        message = {
            "type": "user",
            "message": {"role": "user", "content": user_content(user_input)},
            "parent_tool_use_id": None,
            "uuid": user_uuid,
        }

        async def _one() -> AsyncIterator[dict[str, Any]]:
            yield message

        async def call(client: ClaudeSDKClient) -> None:
            await client.query(_one())

        await self._call(call)

    async def redirect(self, user_input: UserInput) -> bool:
        if self._closing or not self.translator.turn_active:
            return False
        return self.steers.offer(user_input)

    async def reconcile(self, target: ConnectTarget) -> ReconcileVerdict:
        async with self._reconcile_lock:
            if not target.model_id:
                return "invalid"  # the agent lost its model: the host closes the session
            frozen = self.frozen
            if (
                target.instructions != frozen.instructions
                or target.tools != frozen.tools
                or target.mcp_servers != frozen.mcp_servers
                or self._closing
            ):
                return "rebuild"
            patched = False
            try:
                if target.permission_mode != frozen.permission_mode:
                    mode = sdk_permission_mode(target.permission_mode)

                    async def set_mode(client: ClaudeSDKClient) -> None:
                        await client.set_permission_mode(mode)

                    await self._call(set_mode)
                    self.frozen = frozen = _replace(frozen, permission_mode=target.permission_mode)
                    patched = True
                if target.model_id != frozen.model_id:
                    model = target.model_id

                    async def set_model(client: ClaudeSDKClient) -> None:
                        await client.set_model(model)

                    await self._call(set_model)
                    self.frozen = _replace(frozen, model_id=model)
                    self.translator.model_id = model
                    patched = True
            except Exception as exc:
                log.warning("claude-code hot patch failed: %s", exc)
                return "failed"
            return "patched" if patched else "current"

    async def context_usage(self) -> dict[str, Any] | None:
        """The CLI's context-window breakdown (``get_context_usage``); None when unavailable.

        Costly: the CLI counts each part with a ``count_tokens`` request (about 20-35 of
        them), so the host asks at most once per turn, and only when someone reads it."""
        box: dict[str, Any] = {}

        async def call(client: ClaudeSDKClient) -> None:
            box["usage"] = await client.get_context_usage()

        with anyio.move_on_after(_CONTEXT_USAGE_TIMEOUT_S):
            try:
                await self._call(call)
            except Exception as exc:
                log.debug("claude-code context usage unavailable: %s", exc)
                return None
            return dict(box.get("usage") or {})
        return None

    async def respond_approval(
        self, approval_id: str, *, approved: bool, reason: str | None = None
    ) -> bool:
        return self._approvals.respond(approval_id, approved=approved, reason=reason)

    async def close(self) -> None:
        """Stop the CLI: interrupt a running turn and let it settle (bounded), then disconnect
        (stdin EOF; SIGTERM, then SIGKILL, when it does not exit within ``exit_grace_s``)."""
        if self._finished.is_set():
            self._closing = True
            return
        self._approvals.deny_all("the connection closed")
        with anyio.CancelScope(shield=True):
            if not self._closing and self.translator.turn_active:
                await self._interrupt()
            self._closing = True
            self._stop.set()
            with anyio.move_on_after(self._close_timeout_s):
                await self._finished.wait()

    async def _interrupt(self) -> None:
        """The SDK's interrupt: the CLI ends its turn and calls the model no more."""

        async def call(client: ClaudeSDKClient) -> None:
            await client.interrupt()

        with anyio.move_on_after(self._interrupt_timeout_s):
            try:
                await self._call(call)
            except Exception as exc:
                log.warning("claude-code interrupt failed: %s", exc)
                return
            while self.translator.turn_active and self.alive:
                changed = self._turn_changed = anyio.Event()
                await changed.wait()

    # -- approvals --------------------------------------------------------------------------

    async def _can_use_tool(
        self, tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResultAllow | PermissionResultDeny:
        call_id = context.tool_use_id or f"call-{uuid.uuid4().hex}"
        top_level = context.agent_id is None
        if self._headless or self._closing:
            if top_level:
                self._emit_all([ChunkEvent({"type": "tool-output-denied", "toolCallId": call_id})])
                self.translator.denied.add(call_id)
            return PermissionResultDeny(message=_HEADLESS_DENIAL)
        if top_level:
            # The CLI asks once the tool_use block is complete; let the pump catch up so the UI
            # sees the tool's input (``tool-input-available``) before its approval request.
            with anyio.move_on_after(_TOOL_READY_TIMEOUT_S):
                await self._tool_event(call_id).wait()
        approval_id = f"approval-{uuid.uuid4().hex}"
        pending = self._approvals.open(approval_id, call_id)
        request = ApprovalRequest(
            approval_id=approval_id, tool_call_id=call_id, tool_name=tool_name, input=tool_input
        )
        # The host turns this event into the ``tool-approval-request`` chunk (and a denial into
        # ``tool-output-denied``): one emitter for every driver, so nothing is sent twice.
        events: list[RuntimeEvent] = [ToolApprovalRequest(request)]
        self._emit_all(events)
        await self._approvals.wait(approval_id, pending)
        if pending.approved:
            return PermissionResultAllow()
        if top_level:
            self.translator.denied.add(call_id)
        return PermissionResultDeny(message=pending.reason or "The user denied this tool call.")


def _replace(target: ConnectTarget, **changes: Any) -> ConnectTarget:
    return replace(target, **changes)
