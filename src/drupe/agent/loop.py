"""``run_turn``: the in-process agent loop; one turn execution is an async generator of chunks.

``AgentRunner.stream`` (``drupe.agent.runner``, cheap to import) returns it; importing this module
imports pydantic-ai.

Why not ``Agent.iter``: one model request is one step, and the loop must own every chunk (the
placeholder id on ``start``, ``start-step``/``finish-step`` exactly around a request, a held-back
``finish``, approvals that end the turn, retries that are invisible unless announced). So the
loop calls the model's streaming request directly through ``pydantic_ai.direct.
model_request_stream`` (a thin wrapper over ``Model.request_stream`` that applies the model's
own message preparation) and runs the function tools itself. pydantic-ai still owns every
provider wire format. One model request (with its retries) is ``drupe.agent.model_request``;
running a step's tool calls (and a continuation's decisions) is ``drupe.agent.tool_calls``.

Contract:
- Chunk order: ``start {messageId}`` once; per step ``start-step``, content chunks, tool input,
  approval-request and output chunks, ``finish-step``, one cumulative ``message-metadata``;
  then ``finish`` once the result is classified. A continuation (approval seed) emits the decided
  tool outputs (``tool-output-available|error|denied``) right after ``start``.
- A step that ended with a cap reached (tool calls or steps) raises ``LoopLimitError`` and emits
  nothing more; a steer yield on the same step wins (clean ``finish``, reason ``stop``).
- The tool calls of one step run concurrently (as the AI SDK runs them), in one task group
  that the step owns: the step's ``tool-approval-request`` chunks come first, in call order;
  once every call of the step has ended, the chunks hooks wrote meanwhile, then one output
  chunk per call in call order; the model sees the returns in call order too. A tool that
  raises ends only its own call (``tool-output-error``): its siblings run on. While a call
  runs, its progress reports go to ``request.progress`` (preliminary ``tool-output-available``
  chunks, handed over at once, not yielded; see ``drupe.agent.tool_calls``).
- An approval-gated call is not executed: ``tool-approval-request`` is emitted and the turn ends
  cleanly after that step (the steer is not evaluated then). Ungated calls of the step still run.
  With ``request.approve`` (agent sessions) the decision is awaited in place instead, while the
  ungated calls run: approved runs the call, denied answers ``tool-output-denied``, and the turn
  goes on. The approved calls of a continuation seed also run concurrently.
- ``request.inject`` (agent-session steering) is polled after each step that continues the turn;
  what it returns joins the history as steer reminders before the next model request.
- Retry: a step that fails with a retryable error before its first chunk is tried again (see
  ``drupe.agent.retry``), each wait announced by a transient ``data-retry`` chunk. Later or
  final model failures raise ``ProviderError`` chained to the original error.
- A tool that raises does not fail the turn: ``tool-output-error``, and the model sees the error.
- Settles exactly once, by one of three paths: finish (``on_finish``, then ``finish``), error
  (``on_error``, then the error propagates), abort (cancellation or the consumer closing the
  generator: ``on_abort`` shielded and time-bounded, no ``on_error``, nothing more is emitted,
  the cancellation propagates).
- No chunk comes out after the consumer's cancel scope was cancelled (a cheap
  ``checkpoint_if_cancelled`` guards every yield).
- Never yields inside a cancel scope or task group (nested generators are closed with
  ``aclosing``): the step's task group is entered and left between two yields.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import TypeVar

import anyio
from anyio.lowlevel import checkpoint_if_cancelled
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelRequestPart, ModelResponse
from pydantic_ai.models import Model

from drupe.agent.chunker import StepChunker, ui_finish_reason
from drupe.agent.convert import approval_decisions, continuation_seed, to_model_messages
from drupe.agent.features.steer_yield import SteerYield, decide_boundary
from drupe.agent.features.usage import UsageObserver
from drupe.agent.hooks import (
    ComposedHooks,
    StepPlan,
    StepResult,
    TurnContext,
    TurnResult,
    compose_hooks,
)
from drupe.agent.model_request import request_parameters, stream_request
from drupe.agent.request import ApprovalAsk, TurnRequest
from drupe.agent.runner import AgentRunner, LoopLimitError
from drupe.agent.tool_calls import ToolCall, ToolCalls, failed_return
from drupe.chunks.types import Chunk

__all__ = ["AgentRunner", "LoopLimitError", "run_turn"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")


async def run_turn(runner: AgentRunner, request: TurnRequest) -> AsyncGenerator[Chunk, None]:
    """Answer ``request`` with ``runner``'s settings, yielding UI chunks; raise on error,
    propagate cancellation. ``AgentRunner.stream`` returns this generator."""
    turn = _Turn(runner, request)
    settled = False
    try:
        model = runner.resolve_model(request.model_id)
        seed = continuation_seed(request.messages)
        turn.history = to_model_messages(
            request.messages,
            wrap_last_user_as_steer=request.wrap_last_user_as_steer,
            open_tail=seed is not None,
        )
        yield {"type": "start", "messageId": request.message_id}
        await turn.hooks.on_start(turn.ctx)
        for chunk in turn.ctx.drain():
            await checkpoint_if_cancelled()
            yield chunk
        if seed is not None:
            decisions = approval_decisions(seed)
            answered = turn.tools.answer_decisions(decisions, turn.history)
            async with aclosing(answered) as chunks:
                async for chunk in chunks:
                    await checkpoint_if_cancelled()
                    yield chunk

        while True:
            async with aclosing(turn.step(model)) as chunks:
                async for chunk in chunks:
                    # several chunks can be ready without the model awaiting anything:
                    # once the consumer's scope is cancelled, none of them comes out
                    await checkpoint_if_cancelled()
                    yield chunk
            result = turn.classify()  # raises LoopLimitError on a cap
            if result is not None:
                break
            turn.inject()

        settled = True
        await turn.hooks.on_finish(turn.ctx, result)
        for chunk in turn.ctx.drain():
            yield chunk
        yield {"type": "finish", "finishReason": result.finish_reason}
    except BaseException as exc:
        if settled:
            raise
        settled = True
        if isinstance(exc, GeneratorExit | anyio.get_cancelled_exc_class()):
            with anyio.move_on_after(runner.settle_limit, shield=True):
                await _guarded(turn.hooks.on_abort(turn.ctx), "on_abort", turn.ctx)
        elif isinstance(exc, Exception):
            decision = None
            with anyio.move_on_after(runner.settle_limit):
                decision = await _guarded(turn.hooks.on_error(turn.ctx, exc), "on_error", turn.ctx)
            if decision == "retry":
                logger.warning(
                    "on_error asked to retry conversation %r; a streamed turn is not "
                    "replayed (step retries follow the RetryPolicy)",
                    request.conversation_id,
                )
        turn.ctx.drain()  # chunks written while settling a failure are dropped
        raise


@dataclass(slots=True)
class _StepState:
    """What the last completed step left for ``_Turn.classify``."""

    number: int = 0
    calls: int = 0
    finish_reason: str = "stop"
    awaiting_approval: bool = False


@dataclass(slots=True)
class _Turn:
    """The mutable state of one turn execution and its step machinery (owned by ``stream``)."""

    runner: AgentRunner
    request: TurnRequest
    ctx: TurnContext = field(init=False)
    hooks: ComposedHooks = field(init=False)
    tools: ToolCalls = field(init=False)
    history: list[ModelMessage] = field(default_factory=list)
    tool_calls: int = 0
    last: _StepState = field(default_factory=_StepState)

    def __post_init__(self) -> None:
        self.ctx = TurnContext(request=self.request)
        hooks = compose_hooks([UsageObserver()], self.request.hooks)
        # a single part is returned as-is by compose_hooks; the loop still wants it isolated
        self.hooks = hooks if isinstance(hooks, ComposedHooks) else ComposedHooks([hooks])
        self.tools = ToolCalls(self.request, self.ctx, self.hooks, self.runner.clock)

    # --- one step ----------------------------------------------------------------------------

    async def step(self, model: Model) -> AsyncGenerator[Chunk, None]:
        """Run one model request and the tools it called; leave the outcome in ``self.last``."""
        number = self.last.number + 1
        self.ctx.step_number = number
        request = self.request
        plan = StepPlan(
            step_number=number,
            messages=tuple(self.history),
            tools=tuple(request.tools),
            system=request.system,
            model_settings=request.model_settings,
        )
        overrides = await self.hooks.prepare_step(self.ctx, plan) or {}
        for chunk in self.ctx.drain():
            yield chunk
        tools = {entry.name: entry for entry in overrides.get("tools", request.tools)}
        messages = list(overrides.get("messages", self.history))
        settings = overrides.get("model_settings", request.model_settings)
        params = request_parameters(tools.values(), overrides.get("system", request.system))

        chunker = StepChunker(known_tools=tools.keys(), new_id=self.runner.new_id)
        responses: list[ModelResponse] = []
        streamed = stream_request(
            model,
            messages,
            settings,
            params,
            chunker,
            responses,
            runner=self.runner,
            policy=request.retry,
            where=(request.conversation_id, number),
        )
        async with aclosing(streamed) as it:
            async for chunk in it:
                yield chunk
        response = responses[0]
        self.history.append(response)

        calls = chunker.tool_calls
        returns: dict[int, ModelRequestPart] = {}
        jobs: list[tuple[int, ToolCall]] = []
        awaiting_approval = False
        for index, call in enumerate(calls):
            entry = tools.get(call.tool_name)
            if call.input is None or entry is None:
                text = call.error or "invalid call"
                returns[index] = failed_return(call.tool_name, call.call_id, text)
                continue
            ask = None
            if entry.is_approval_gated(call.input):
                approval_id = f"approval_{self.runner.new_id()}"
                yield {
                    "type": "tool-approval-request",
                    "approvalId": approval_id,
                    "toolCallId": call.call_id,
                }
                if request.approve is None:
                    awaiting_approval = True
                    continue
                ask = ApprovalAsk(
                    approval_id=approval_id,
                    tool_call_id=call.call_id,
                    tool_name=call.tool_name,
                    input=call.input,
                )
            jobs.append((index, ToolCall(entry, call.input, call.call_id, ask)))
        outcomes = await self.tools.run([job for _, job in jobs], self.history)
        for queued in self.ctx.drain():
            yield queued
        for (index, _), (chunk, returned) in zip(jobs, outcomes, strict=True):
            yield chunk
            returns[index] = returned
        if returns:
            self.history.append(ModelRequest(parts=[returns[i] for i in sorted(returns)]))
        self.tool_calls += len(calls)

        yield {"type": "finish-step"}
        self.last = _StepState(
            number=number,
            calls=len(calls),
            finish_reason=ui_finish_reason(response.finish_reason, has_tool_calls=bool(calls)),
            awaiting_approval=awaiting_approval,
        )
        step = StepResult(
            step_number=number,
            response=response,
            usage=response.usage,
            finish_reason=self.last.finish_reason,
            tool_calls=len(calls),
        )
        await self.hooks.on_step_finish(self.ctx, step)
        for chunk in self.ctx.drain():
            yield chunk

    def classify(self) -> TurnResult | None:
        """Decide after a step: finish (a ``TurnResult``), continue (``None``) or raise on a cap."""
        last, request = self.last, self.request
        if last.awaiting_approval:
            return self._result("tool-calls", awaiting_approval=True)
        if last.calls == 0:
            return self._result(last.finish_reason)
        boundary = decide_boundary(
            steer=SteerYield(request.steer_pending).fired(),
            tool_calls=self.tool_calls,
            max_tool_calls=request.max_tool_calls,
            steps=last.number,
            max_steps=request.max_steps,
        )
        if boundary == "yield":
            return self._result("stop", yielded_to_steer=True)
        if boundary == "tool_call_limit_reached":
            raise LoopLimitError(
                boundary, f"{self.tool_calls} tool calls made (cap {request.max_tool_calls})"
            )
        if boundary == "step_limit_reached":
            raise LoopLimitError(boundary, f"{last.number} steps taken (cap {request.max_steps})")
        return None

    def _result(self, finish_reason: str, **flags: bool) -> TurnResult:
        return TurnResult(
            finish_reason=finish_reason, steps=self.last.number, tool_calls=self.tool_calls, **flags
        )

    def inject(self) -> None:
        """Add the messages ``request.inject`` hands over to the history, as steer reminders."""
        if self.request.inject is None:
            return
        injected = self.request.inject()
        parts: list[ModelRequestPart] = [
            part
            for message in injected
            for converted in to_model_messages([message], wrap_last_user_as_steer=True)
            if isinstance(converted, ModelRequest)
            for part in converted.parts
        ]
        if not parts:
            return
        last = self.history[-1] if self.history else None
        if isinstance(last, ModelRequest):  # the step's tool returns: one request, not two
            self.history[-1] = replace(last, parts=[*last.parts, *parts])
        else:
            self.history.append(ModelRequest(parts=parts))


# --- helpers ---------------------------------------------------------------------------------


async def _guarded(call: Awaitable[_T], hook: str, ctx: TurnContext) -> _T | None:
    """Await a settling hook; a throw is logged and swallowed (cancellation propagates)."""
    try:
        return await call
    except Exception:  # isolation boundary: hook runner (settling must complete)
        logger.exception("hook %s raised while settling conversation %r", hook, ctx.conversation_id)
        return None
