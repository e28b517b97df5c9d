"""``InProcessConnection``: Drupe's own agent loop as the runtime of one agent session.

The connection keeps the session's history (UI messages) in memory, loaded once by the driver on
connect and extended after every turn. ``send`` starts a turn as a task in the driver's task
group; that task runs ``AgentRunner.stream`` and turns what it yields into runtime events on an
unbounded memory stream that ``events()`` hands to the host's one reader.

Mapping:
* every loop chunk -> ``ChunkEvent``, except ``start`` and ``finish``: the host frames each turn
  (as with the Claude Code driver); a normal end -> ``TurnComplete``, a failure ->
  ``ErrorEvent {name, message, statusCode?}``; a ``data-retry`` chunk also -> ``ApiRetry``;
  each model request's usage -> ``UsageEvent``; at the end of a turn ``ContextUsage`` with the
  size of the last request (``context_usage()`` adds the window when one is known);
* ``ResumeToken``: the id of the last user message the runtime saw (the sent one, then every
  injected steer), emitted when it changes. It is opaque to the host; the runtime itself resumes
  from the persisted history the driver loads.
* Steering: ``redirect`` queues a text-only steer while a turn runs. The loop polls the queue
  after every step that continues the turn (``TurnRequest.inject``): the steers join the history
  as steer reminders, and ``SteerBoundary`` is emitted right then, before any chunk of the next
  step. Steers still queued when the turn ends come back as ``SteerUndelivered``. Usage
  ``message-metadata`` after a boundary counts from the boundary (it belongs to the new row).
* Tool progress (``TurnRequest.progress``): a running tool's snapshot is forwarded at once as a
  ``ChunkEvent`` (a preliminary ``tool-output-available``), between the loop's chunks.
* Approvals in place (``TurnRequest.approve``): a gated call emits a ``ToolApprovalRequest``
  event and the turn waits for ``respond_approval``; approved runs the call, denied tells the
  model. Who emits the UI chunks: by default the HOST (``AgentSessionHost`` turns the event into
  the ``tool-approval-request`` chunk and emits ``tool-output-denied`` when it relays a denial),
  so the connection holds back the loop's copies of those two chunks; with
  ``emit_approval_chunks=True`` (a consumer without that host) it forwards them. A headless turn
  is denied at once without an event, and its ``tool-output-denied`` is always forwarded.

Must never: run two turns at once, hand a steer out twice or lose one, or raise from ``close``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import Any

import anyio
from anyio.abc import TaskGroup

from drupe.agent.hooks import Hooks, StepResult, TurnContext
from drupe.agent.request import ApprovalAsk, TurnRequest
from drupe.agent.runner import AgentRunner
from drupe.chunks.accumulate import AccumulateError, Accumulator
from drupe.chunks.types import Chunk, UIMessage
from drupe.errors import DriverError
from drupe.ids import session_conversation_id
from drupe.sessions.drivers.approvals import PendingApprovals
from drupe.sessions.drivers.base import (
    ApiRetry,
    ApprovalRequest,
    ChunkEvent,
    ConnectTarget,
    ContextUsage,
    ErrorEvent,
    ReconcileVerdict,
    ResumeToken,
    RuntimeEvent,
    SteerBoundary,
    SteerUndelivered,
    ToolApprovalRequest,
    TurnComplete,
    UsageEvent,
    UserInput,
)
from drupe.sessions.drivers.inprocess.turn_run import (
    TurnRun,
    history_before,
    is_text_only,
    rebase_usage,
    serialize_error,
    worth_keeping,
)
from drupe.sessions.drivers.outbox import EventOutbox
from drupe.tools.base import ToolEntry

__all__ = ["InProcessConnection"]

log = logging.getLogger(__name__)

_HEADLESS_DENIAL = "No one can approve tool calls in this turn (it runs headless)."
_FRAMING = frozenset(("start", "finish"))


def _new_id() -> str:
    return uuid.uuid4().hex[:16]


class _EventHooks(Hooks):
    """Loop observer: hands every completed step to the connection (usage, context size)."""

    def __init__(self, on_step: Callable[[TurnContext, StepResult], None]) -> None:
        self._on_step = on_step

    async def on_step_finish(self, ctx: TurnContext, step: StepResult) -> None:
        self._on_step(ctx, step)


class InProcessConnection:
    """A live in-process runtime for one session (see the module docstring)."""

    def __init__(
        self,
        *,
        runner: AgentRunner,
        session_id: str,
        target: ConnectTarget,
        history: Sequence[UIMessage],
        build_tools: Callable[[ConnectTarget], list[ToolEntry]],
        check_model: Callable[[str], None],
        task_group: TaskGroup,
        resume_token: str | None = None,
        request_options: Mapping[str, Any] | None = None,
        close_timeout_s: float = 5.0,
        on_close: Callable[[InProcessConnection], None] | None = None,
        emit_approval_chunks: bool = False,
        context_window: Callable[[str], int | None] | None = None,
    ) -> None:
        self.session_id = session_id
        self.frozen = target
        """The configuration the next turn runs with (a turn's own is frozen at its start)."""
        self.history: list[UIMessage] = [m for m in history if worth_keeping(m)]
        self.resume_token = resume_token
        self._runner = runner
        self._build_tools = build_tools
        self._check_model = check_model
        self._tg = task_group
        self._request_options = dict(request_options or {})
        self._close_timeout_s = close_timeout_s
        self._on_close = on_close
        self._emit_approval_chunks = emit_approval_chunks
        self._context_window = context_window
        self._context_tokens: int | None = None
        """Tokens of the last model request (its input plus its output): the context size."""
        self._outbox = EventOutbox()
        self._turn: TurnRun | None = None
        self._approvals = PendingApprovals()
        self._closed = False

    # -- Connection -----------------------------------------------------------------------------

    async def events(self) -> AsyncIterator[RuntimeEvent]:
        # The receive side is never closed here: a reader that stops early (or a second call
        # after close) must not break the stream; it ends once ``close`` closed the send side.
        async for event in self._outbox.events():
            yield event

    async def send(self, user_input: UserInput) -> None:
        if self._closed:
            raise DriverError("the in-process connection is closed")
        if self._turn is not None:
            raise DriverError("a turn is already running on this connection")
        run = TurnRun(user_input=user_input, headless=user_input.headless)
        self._turn = run
        self._tg.start_soon(self._run_turn, run)

    async def redirect(self, user_input: UserInput) -> bool:
        run = self._turn
        if self._closed or run is None or run.ended or not is_text_only(user_input):
            return False
        run.pending.append(user_input)
        run.headless = run.headless and user_input.headless
        return True

    async def reconcile(self, target: ConnectTarget) -> ReconcileVerdict:
        if target == self.frozen:
            return "current"
        try:
            self._check_model(target.model_id)
        except Exception as exc:
            log.info("in-process reconcile: model %r is unusable: %s", target.model_id, exc)
            return "invalid"
        self.frozen = target  # the running turn keeps its own request; the next one uses this
        return "patched"

    async def context_usage(self) -> dict[str, Any] | None:
        """The context size after the last model request; None before the first one."""
        if self._context_tokens is None:
            return None
        usage: dict[str, Any] = {"totalTokens": self._context_tokens}
        window = None
        if self._context_window is not None:
            try:
                window = self._context_window(self.frozen.model_id)
            except Exception:  # isolation boundary: an unknown window is just not reported
                window = None
        if window:
            usage["maxTokens"] = window
            usage["percentage"] = round(100 * self._context_tokens / window, 1)
        return usage

    async def respond_approval(
        self, approval_id: str, *, approved: bool, reason: str | None = None
    ) -> bool:
        return self._approvals.respond(approval_id, approved=approved, reason=reason)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._approvals.deny_all("the connection closed")
        run = self._turn
        if run is not None:
            run.scope.cancel()
            with anyio.CancelScope(shield=True), anyio.move_on_after(self._close_timeout_s):
                await run.done.wait()
        self._outbox.close()
        if self._on_close is not None:
            self._on_close(self)

    # -- the turn task --------------------------------------------------------------------------

    def _emit(self, event: RuntimeEvent) -> None:
        self._outbox.put(event)

    def _set_token(self, message: UIMessage) -> None:
        token = message.get("id")
        if isinstance(token, str) and token and token != self.resume_token:
            self.resume_token = token
            self._emit(ResumeToken(token))

    async def _run_turn(self, run: TurnRun) -> None:
        error: BaseException | None = None
        try:
            with run.scope:
                try:
                    await self._stream(run)
                except Exception as exc:  # the turn failed: an error event, the connection lives
                    error = exc
        finally:
            self._finish_turn(run, error)

    async def _stream(self, run: TurnRun) -> None:
        target = self.frozen
        message = run.user_input.message
        message_id = _new_id()
        run.segments.append(Accumulator({"id": message_id, "role": "assistant", "parts": []}))
        self._set_token(message)
        options = self._request_options
        request = TurnRequest(
            conversation_id=session_conversation_id(self.session_id),
            message_id=message_id,
            model_id=target.model_id,
            messages=[*history_before(self.history, message.get("id")), message],
            system=target.instructions,
            tools=self._build_tools(target),
            wrap_last_user_as_steer=run.user_input.system_reminder,
            hooks=[_EventHooks(self._step_finished)],
            inject=lambda: self._inject(run),
            approve=lambda ask: self._approve(run, ask),
            progress=lambda chunk: self._progress(run, chunk),
            max_steps=int(options.get("max_steps", 100)),
            max_tool_calls=int(options.get("max_tool_calls", 200)),
        )
        async with aclosing(self._runner.stream(request)) as chunks:
            async for chunk in chunks:
                self._forward(run, chunk)
        run.completed = True

    def _forward(self, run: TurnRun, chunk: Chunk) -> None:
        kind = chunk.get("type")
        if kind == "message-metadata":
            chunk = rebase_usage(run, chunk)
        try:
            run.segments[-1].push(chunk)
        except AccumulateError as exc:
            log.warning("in-process history could not fold a %r chunk: %s", kind, exc)
        if kind in _FRAMING:
            return
        if kind == "tool-approval-request" and (run.headless or not self._emit_approval_chunks):
            return  # headless: denied at once; otherwise the host shows the request
        if kind == "tool-output-denied" and chunk.get("toolCallId") in run.relayed_denials:
            return  # the host emitted it when it relayed the denial
        self._emit(ChunkEvent(chunk))
        if kind == "data-retry":
            self._emit(ApiRetry(dict(chunk.get("data") or {})))

    def _progress(self, run: TurnRun, chunk: Chunk) -> None:
        """``TurnRequest.progress``: a running tool's snapshot, forwarded at once."""
        if not run.ended:
            self._forward(run, chunk)

    def _step_finished(self, ctx: TurnContext, step: StepResult) -> None:
        usage = step.usage
        total = usage.input_tokens + usage.output_tokens
        self._context_tokens = total
        self._emit(
            UsageEvent(
                {
                    "requestId": f"{ctx.message_id}:{step.step_number}",
                    "model": ctx.model_id,
                    "messageAssociation": "current-turn",
                    "usage": {
                        "inputTokens": usage.input_tokens,
                        "outputTokens": usage.output_tokens,
                        "totalTokens": total,
                    },
                }
            )
        )

    def _inject(self, run: TurnRun) -> list[UIMessage]:
        """``TurnRequest.inject``: take the queued steers at a step boundary (synchronously)."""
        if not run.pending or run.ended:
            return []
        taken, run.pending = run.pending, []
        self._emit(SteerBoundary(tuple(taken)))
        messages = [s.message for s in taken]
        run.steers.append(messages)
        run.segments.append(Accumulator({"id": _new_id(), "role": "assistant", "parts": []}))
        run.usage_base = dict(run.last_usage)
        self._set_token(messages[-1])
        return messages

    async def _approve(self, run: TurnRun, ask: ApprovalAsk) -> tuple[bool, str | None]:
        """``TurnRequest.approve``: wait in place for ``respond_approval`` (or deny headless)."""
        if run.headless or self._closed:
            log.info(
                "in-process: denied %s (%s) in a headless turn", ask.tool_name, ask.tool_call_id
            )
            return False, _HEADLESS_DENIAL
        pending = self._approvals.open(ask.approval_id, ask.tool_call_id)
        self._emit(
            ToolApprovalRequest(
                ApprovalRequest(
                    approval_id=ask.approval_id,
                    tool_call_id=ask.tool_call_id,
                    tool_name=ask.tool_name,
                    input=dict(ask.input),
                )
            )
        )
        await self._approvals.wait(ask.approval_id, pending)
        if not pending.approved and not self._emit_approval_chunks:
            run.relayed_denials.add(ask.tool_call_id)
        return pending.approved, pending.reason

    def _finish_turn(self, run: TurnRun, error: BaseException | None) -> None:
        """End the turn without awaiting: steers left, history, then the terminal event."""
        run.ended = True
        undelivered, run.pending = tuple(run.pending), []
        self._turn = None
        self._remember(run)
        run.done.set()
        if undelivered:
            self._emit(SteerUndelivered(undelivered))
        if self._context_tokens is not None and (error is not None or run.completed):
            self._emit(ContextUsage({"totalTokens": self._context_tokens}))
        if error is not None:
            self._emit(ErrorEvent(serialize_error(error)))
        elif run.completed:
            self._emit(TurnComplete())
        # else: cancelled (the connection or the driver is closing); the events end

    def _remember(self, run: TurnRun) -> None:
        user = run.user_input.message
        history = [*history_before(self.history, user.get("id")), user]
        for index, segment in enumerate(run.segments):
            if index > 0:
                history.extend(run.steers[index - 1])
            snapshot = segment.snapshot()
            if worth_keeping(snapshot):
                history.append(snapshot)
        self.history = history
