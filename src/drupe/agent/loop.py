"""``run_turn``: the in-process agent loop; one turn execution is an async generator of chunks.

``AgentRunner.stream`` (``drupe.agent.runner``, cheap to import) returns it; importing this module
imports pydantic-ai.

Why not ``Agent.iter``: one model request is one step, and the loop must own every chunk (the
placeholder id on ``start``, ``start-step``/``finish-step`` exactly around a request, a held-back
``finish``, approvals that end the turn, retries that are invisible unless announced). So the
loop calls the model's streaming request directly through ``pydantic_ai.direct.
model_request_stream`` (a thin wrapper over ``Model.request_stream`` that applies the model's
own message preparation) and runs the function tools itself. pydantic-ai still owns every
provider wire format.

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
  raises ends only its own call (``tool-output-error``): its siblings run on.
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
from collections.abc import AsyncGenerator, Awaitable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, cast

import anyio
from anyio.lowlevel import checkpoint_if_cancelled
from pydantic_ai.direct import model_request_stream
from pydantic_ai.exceptions import AgentRunError
from pydantic_ai.messages import (
    InstructionPart,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ToolReturnPart,
)
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition
from pydantic_core import to_jsonable_python

from drupe.agent.chunker import StepChunker, ui_finish_reason
from drupe.agent.convert import (
    ApprovalDecision,
    approval_decisions,
    continuation_seed,
    denied_return,
    to_model_messages,
)
from drupe.agent.features.steer_yield import SteerYield, decide_boundary
from drupe.agent.features.usage import UsageObserver
from drupe.agent.hooks import (
    ComposedHooks,
    StepPlan,
    StepResult,
    TurnContext,
    TurnResult,
    compose_hooks,
    execute_tool,
)
from drupe.agent.request import ApprovalAsk, TurnRequest
from drupe.agent.retry import FailureInfo, classify, retry_chunk
from drupe.agent.runner import AgentRunner, LoopLimitError
from drupe.chunks.types import Chunk
from drupe.errors import DrupeError, ProviderError
from drupe.tools.base import ToolContext, ToolEntry

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
            async with aclosing(turn.answer_decisions(approval_decisions(seed))) as chunks:
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


@dataclass(frozen=True, slots=True)
class _Call:
    """One tool call to run: its tool, input and id, and the in-place approval it awaits."""

    entry: ToolEntry
    input: Mapping[str, Any]
    call_id: str
    ask: ApprovalAsk | None = None


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
    history: list[ModelMessage] = field(default_factory=list)
    tool_calls: int = 0
    last: _StepState = field(default_factory=_StepState)

    def __post_init__(self) -> None:
        self.ctx = TurnContext(request=self.request)
        hooks = compose_hooks([UsageObserver()], self.request.hooks)
        # a single part is returned as-is by compose_hooks; the loop still wants it isolated
        self.hooks = hooks if isinstance(hooks, ComposedHooks) else ComposedHooks([hooks])

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
        params = _request_parameters(tools.values(), overrides.get("system", request.system))

        chunker = StepChunker(known_tools=tools.keys(), new_id=self.runner.new_id)
        responses: list[ModelResponse] = []
        async with aclosing(
            self._request(model, messages, settings, params, chunker, responses)
        ) as it:
            async for chunk in it:
                yield chunk
        response = responses[0]
        self.history.append(response)

        calls = chunker.tool_calls
        returns: dict[int, ModelRequestPart] = {}
        jobs: list[tuple[int, _Call]] = []
        awaiting_approval = False
        for index, call in enumerate(calls):
            entry = tools.get(call.tool_name)
            if call.input is None or entry is None:
                returns[index] = _failed(call.tool_name, call.call_id, call.error or "invalid call")
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
            jobs.append((index, _Call(entry, call.input, call.call_id, ask)))
        outcomes = await self._run_calls([job for _, job in jobs])
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

    async def _request(
        self,
        model: Model,
        messages: list[ModelMessage],
        settings: Mapping[str, Any] | None,
        params: ModelRequestParameters,
        chunker: StepChunker,
        out: list[ModelResponse],
    ) -> AsyncGenerator[Chunk, None]:
        """Stream one model request, retrying before its first chunk; emits ``start-step``."""
        policy = self.request.retry
        attempt = 1
        started = False
        while True:
            try:
                async with model_request_stream(
                    model,
                    messages,
                    model_settings=cast(ModelSettings | None, settings),
                    model_request_parameters=params,
                    instrument=False,
                ) as response_stream:
                    async for event in response_stream:
                        chunks = chunker.feed(event)
                        if chunks and not started:
                            started = True
                            yield {"type": "start-step"}
                        for chunk in chunks:
                            yield chunk
                    response = response_stream.get()
                break
            except Exception as error:
                info = classify(error, now=self.runner.now())
                delay = None if started else policy.delay_for(attempt, info)
                if delay is None:
                    wrapped = _as_provider_error(error, info, started=started)
                    if wrapped is error:
                        raise
                    raise wrapped from error
                attempt += 1
                logger.warning(
                    "model request failed (conversation %r, step %d, status %s); "
                    "try %d/%d in %.3fs",
                    self.request.conversation_id,
                    self.ctx.step_number,
                    info.status_code,
                    attempt,
                    policy.attempts,
                    delay,
                )
                yield retry_chunk(next_attempt=attempt, policy=policy, delay=delay, info=info)
                await self.runner.sleep(delay)
        tail = chunker.finish(response)
        if not started:
            yield {"type": "start-step"}
        for chunk in tail:
            yield chunk
        out.append(response)

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

    # --- tools -------------------------------------------------------------------------------

    async def answer_decisions(
        self, decisions: list[ApprovalDecision]
    ) -> AsyncGenerator[Chunk, None]:
        """Run the approved calls of a continuation seed (concurrently) and deny the others."""
        tools = {entry.name: entry for entry in self.request.tools}
        answered: list[tuple[Chunk, ModelRequestPart] | None] = []
        jobs: list[_Call] = []
        for decision in decisions:
            call_id, name = decision.call_id, decision.tool_name
            entry = tools.get(name)
            if not decision.approved:
                chunk: Chunk = {"type": "tool-output-denied", "toolCallId": call_id}
                answered.append((chunk, denied_return(name, call_id, decision.reason)))
            elif entry is None:
                text = f"Tool {name!r} is no longer available."
                chunk = {"type": "tool-output-error", "toolCallId": call_id, "errorText": text}
                answered.append((chunk, _failed(name, call_id, text)))
            else:
                answered.append(None)
                jobs.append(_Call(entry, decision.input, call_id))
        ran = iter(await self._run_calls(jobs))
        for queued in self.ctx.drain():
            yield queued
        returns: list[ModelRequestPart] = []
        for slot in answered:
            chunk, returned = slot if slot is not None else next(ran)
            yield chunk
            returns.append(returned)
        if returns:
            self.history.append(ModelRequest(parts=returns))

    async def _run_calls(self, calls: Sequence[_Call]) -> list[tuple[Chunk, ModelRequestPart]]:
        """Run ``calls`` concurrently in one task group; return their outcomes in call order.

        A gated call awaits its in-place decision first (denied: ``tool-output-denied``, never
        executed). A tool's own error is its outcome and never cancels a sibling; an approval
        callback that raises fails the step: the siblings are cancelled and the error raised.
        """
        outcomes: list[tuple[Chunk, ModelRequestPart] | None] = [None] * len(calls)
        failures: list[Exception] = []

        async def run(index: int, call: _Call, scope: anyio.CancelScope) -> None:
            try:
                outcomes[index] = await self._gate_and_execute(call)
            except Exception as error:  # the approval callback failed: so does the step
                failures.append(error)
                scope.cancel()

        if calls:
            async with anyio.create_task_group() as group:
                for index, call in enumerate(calls):
                    group.start_soon(run, index, call, group.cancel_scope)
        if failures:
            raise failures[0]
        return [outcome for outcome in outcomes if outcome is not None]

    async def _gate_and_execute(self, call: _Call) -> tuple[Chunk, ModelRequestPart]:
        if call.ask is not None:
            assert self.request.approve is not None  # an ask is only made with a callback
            approved, reason = await self.request.approve(call.ask)
            if not approved:
                chunk: Chunk = {"type": "tool-output-denied", "toolCallId": call.call_id}
                return chunk, denied_return(call.entry.name, call.call_id, reason)
        return await self._execute(call.entry, call.input, call.call_id)

    async def _execute(
        self, entry: ToolEntry, arguments: Mapping[str, Any], call_id: str
    ) -> tuple[Chunk, ToolReturnPart]:
        """Run one tool through the hook wrapper; its error becomes ``tool-output-error``."""
        tool_context = ToolContext(
            conversation_id=self.request.conversation_id,
            tool_call_id=call_id,
            message_id=self.request.message_id,
        )
        try:
            output = await execute_tool(
                entry,
                arguments,
                tool_context,
                hooks=self.hooks,
                ctx=self.ctx,
                messages=tuple(self.history),
                clock=self.runner.clock,
            )
        except Exception as error:  # the tool failed: the model sees the error, the turn goes on
            text = str(error) or type(error).__name__
            chunk: Chunk = {"type": "tool-output-error", "toolCallId": call_id, "errorText": text}
            return chunk, _failed(entry.name, call_id, text)
        chunk = {
            "type": "tool-output-available",
            "toolCallId": call_id,
            "output": to_jsonable_python(output, fallback=repr),  # chunks are plain JSON
        }
        return chunk, ToolReturnPart(tool_name=entry.name, content=output, tool_call_id=call_id)


# --- helpers ---------------------------------------------------------------------------------


async def _guarded(call: Awaitable[_T], hook: str, ctx: TurnContext) -> _T | None:
    """Await a settling hook; a throw is logged and swallowed (cancellation propagates)."""
    try:
        return await call
    except Exception:  # isolation boundary: hook runner (settling must complete)
        logger.exception("hook %s raised while settling conversation %r", hook, ctx.conversation_id)
        return None


def _request_parameters(tools: Any, system: str | None) -> ModelRequestParameters:
    return ModelRequestParameters(
        function_tools=[
            ToolDefinition(
                name=entry.name,
                description=entry.description,
                parameters_json_schema=dict(entry.input_schema),
            )
            for entry in tools
        ],
        allow_text_output=True,
        instruction_parts=[InstructionPart(content=system)] if system else None,
    )


def _failed(tool_name: str, call_id: str, text: str) -> ToolReturnPart:
    return ToolReturnPart(tool_name=tool_name, content=text, tool_call_id=call_id, outcome="failed")


def _as_provider_error(error: Exception, info: FailureInfo, *, started: bool) -> Exception:
    """Wrap model/transport failures in ``ProviderError``; return anything else unchanged."""
    if isinstance(error, DrupeError):
        return error
    if isinstance(error, AgentRunError) or info.retryable or info.status_code is not None:
        where = " after the step had started streaming" if started else ""
        return ProviderError(
            f"model request failed{where}: {info.message}",
            status_code=info.status_code,
            retryable=info.retryable,
        )
    return error
