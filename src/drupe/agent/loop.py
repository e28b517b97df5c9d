"""``AgentRunner``: the in-process agent loop; one turn execution is an async generator of chunks.

Why not ``Agent.iter``: one model request is one step, and the loop must own every chunk (the
placeholder id on ``start``, ``start-step``/``finish-step`` exactly around a request, a held-back
``finish``, approvals that end the turn, retries that are invisible unless announced). So the
loop calls the model's streaming request directly through ``pydantic_ai.direct.
model_request_stream`` (a thin wrapper over ``Model.request_stream`` that applies the model's
own message preparation) and runs the function tools itself. pydantic-ai still owns every
provider wire format.

Contract:
- Chunk order: ``start {messageId}`` once, then per step ``start-step``, content chunks,
  tool input/approval/output chunks, ``finish-step``, one cumulative ``message-metadata``;
  then ``finish`` once the result is classified. A continuation (approval seed) emits the
  decided tool outputs (``tool-output-available|error|denied``) right after ``start``.
- A step that ended with a cap reached (tool calls or steps) raises ``LoopLimitError`` and emits
  nothing more; a steer yield on the same step wins (clean ``finish``, reason ``stop``).
- An approval-gated call is not executed: ``tool-approval-request`` is emitted and the turn ends
  cleanly after that step (steer is not evaluated then).
- Retry: a step that fails with a retryable error before its first chunk is tried again (see
  ``drupe.agent.retry``), each wait announced by a transient ``data-retry`` chunk. Later or
  final failures raise ``ProviderError`` chained to the original error.
- Settles exactly once, by one of three paths: finish (``on_finish``, then ``finish``), error
  (``on_error``, then the error propagates), abort (cancellation or the consumer closing the
  generator: ``on_abort`` shielded and time-bounded, no ``on_error``, nothing more is emitted,
  the cancellation propagates).
- Never yields inside a cancel scope or task group; tools of a step run one after another.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar, cast

import anyio
from pydantic_ai.direct import model_request_stream
from pydantic_ai.exceptions import AgentRunError
from pydantic_ai.messages import (
    InstructionPart,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ToolReturnPart,
)
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition

from drupe.agent.convert import (
    ParsedToolCall,
    StepChunker,
    denied_return,
    to_model_messages,
    tool_name_of,
    ui_finish_reason,
)
from drupe.agent.features.steer_yield import SteerYield, decide_boundary
from drupe.agent.features.usage import UsageObserver
from drupe.agent.hooks import (
    ComposedHooks,
    Hooks,
    StepPlan,
    StepResult,
    TurnContext,
    TurnResult,
    compose_hooks,
    execute_tool,
)
from drupe.agent.request import TurnRequest
from drupe.agent.retry import FailureInfo, classify, retry_chunk
from drupe.chunks.types import Chunk, UIMessage
from drupe.errors import DrupeError, ProviderError
from drupe.tools.base import ToolContext, ToolEntry

__all__ = ["AgentRunner", "LoopLimitError"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

LimitCode = Literal["tool_call_limit_reached", "step_limit_reached"]


class LoopLimitError(DrupeError):
    """The turn reached a cap with tools still asking for more; never reported as success."""

    def __init__(self, code: LimitCode, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code: LimitCode = code


class AgentRunner:
    """Runs turns of the in-process agent; one runner serves any number of concurrent turns."""

    def __init__(
        self,
        resolve_model: Callable[[str], Model],
        *,
        sleep: Callable[[float], Awaitable[Any]] = anyio.sleep,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        new_id: Callable[[], str] = lambda: uuid.uuid4().hex[:16],
        settle_limit: float = 5.0,
    ) -> None:
        self._resolve_model = resolve_model
        self._sleep = sleep
        self._clock = clock
        self._now = now
        self._new_id = new_id
        self._settle_limit = settle_limit

    async def stream(self, request: TurnRequest) -> AsyncGenerator[Chunk, None]:
        """Answer ``request``, yielding UI chunks; raise on error, propagate cancellation."""
        ctx = TurnContext(request=request)
        hooks = compose_hooks([UsageObserver()], request.hooks)
        if not isinstance(hooks, ComposedHooks):
            hooks = ComposedHooks([hooks])  # one part runs as-is; the loop still isolates it
        settled = False
        try:
            model = self._resolve_model(request.model_id)
            seed = _continuation_seed(request)
            history = to_model_messages(
                request.messages,
                wrap_last_user_as_steer=request.wrap_last_user_as_steer,
                open_tail=seed is not None,
            )
            yield {"type": "start", "messageId": request.message_id}
            await hooks.on_start(ctx)
            for chunk in ctx.drain():
                yield chunk

            tool_calls = 0
            if seed is not None:
                returns: list[ModelRequestPart] = []
                for decision in _decisions(seed):
                    chunk, returned = await self._decide(decision, request, hooks, ctx, history)
                    for queued in ctx.drain():
                        yield queued
                    yield chunk
                    returns.append(returned)
                if returns:
                    history.append(ModelRequest(parts=returns))

            steer = SteerYield(request.steer_pending)
            step = 0
            while True:
                step += 1
                ctx.step_number = step
                plan = StepPlan(
                    step_number=step,
                    messages=tuple(history),
                    tools=tuple(request.tools),
                    system=request.system,
                    model_settings=request.model_settings,
                )
                overrides = await hooks.prepare_step(ctx, plan) or {}
                for chunk in ctx.drain():
                    yield chunk
                step_messages = list(overrides.get("messages", history))
                step_tools = {t.name: t for t in overrides.get("tools", request.tools)}
                system = overrides.get("system", request.system)
                settings = overrides.get("model_settings", request.model_settings)
                params = _request_parameters(step_tools.values(), system)

                attempt = 1
                while True:
                    chunker = StepChunker(known_tools=step_tools.keys(), new_id=self._new_id)
                    started = False
                    try:
                        async with model_request_stream(
                            model,
                            step_messages,
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
                        info = classify(error, now=self._now())
                        delay = None if started else request.retry.delay_for(attempt, info)
                        if delay is None:
                            wrapped = _as_provider_error(error, info, started=started)
                            if wrapped is error:
                                raise
                            raise wrapped from error
                        attempt += 1
                        logger.warning(
                            "model request failed (conversation %r, step %d, status %s); "
                            "retry %d/%d in %.3fs",
                            request.conversation_id,
                            step,
                            info.status_code,
                            attempt,
                            request.retry.attempts,
                            delay,
                        )
                        yield retry_chunk(
                            next_attempt=attempt, policy=request.retry, delay=delay, info=info
                        )
                        await self._sleep(delay)

                tail = chunker.finish(response)
                if not started:
                    yield {"type": "start-step"}
                for chunk in tail:
                    yield chunk
                history.append(response)

                calls = chunker.tool_calls
                returns = []
                awaiting_approval = False
                for call in calls:
                    entry = step_tools.get(call.tool_name)
                    if call.input is None or entry is None:
                        returns.append(_failed_return(call, call.error or "invalid tool call"))
                        continue
                    if entry.is_approval_gated(call.input):
                        awaiting_approval = True
                        yield {
                            "type": "tool-approval-request",
                            "approvalId": f"approval_{self._new_id()}",
                            "toolCallId": call.call_id,
                        }
                        continue
                    chunk, returned = await self._execute(
                        entry, call.input, call.call_id, request, hooks, ctx, history
                    )
                    for queued in ctx.drain():
                        yield queued
                    yield chunk
                    returns.append(returned)
                if returns:
                    history.append(ModelRequest(parts=returns))
                tool_calls += len(calls)

                yield {"type": "finish-step"}
                finish_reason = ui_finish_reason(response.finish_reason, has_tool_calls=bool(calls))
                await hooks.on_step_finish(
                    ctx,
                    StepResult(
                        step_number=step,
                        response=response,
                        usage=response.usage,
                        finish_reason=finish_reason,
                        tool_calls=len(calls),
                    ),
                )
                for chunk in ctx.drain():
                    yield chunk

                if awaiting_approval:
                    result = TurnResult(
                        finish_reason="tool-calls",
                        steps=step,
                        tool_calls=tool_calls,
                        awaiting_approval=True,
                    )
                    break
                if not calls:
                    result = TurnResult(
                        finish_reason=finish_reason, steps=step, tool_calls=tool_calls
                    )
                    break
                boundary = decide_boundary(
                    steer=steer.fired(),
                    tool_calls=tool_calls,
                    max_tool_calls=request.max_tool_calls,
                    steps=step,
                    max_steps=request.max_steps,
                )
                if boundary == "yield":
                    result = TurnResult(
                        finish_reason="stop",
                        steps=step,
                        tool_calls=tool_calls,
                        yielded_to_steer=True,
                    )
                    break
                if boundary == "tool_call_limit_reached":
                    raise LoopLimitError(
                        boundary,
                        f"the turn made {tool_calls} tool calls (cap {request.max_tool_calls})",
                    )
                if boundary == "step_limit_reached":
                    raise LoopLimitError(
                        boundary, f"the turn took {step} steps (cap {request.max_steps})"
                    )

            settled = True
            await hooks.on_finish(ctx, result)
            for chunk in ctx.drain():
                yield chunk
            yield {"type": "finish", "finishReason": result.finish_reason}
        except BaseException as exc:
            if settled:
                raise
            settled = True
            if isinstance(exc, GeneratorExit | anyio.get_cancelled_exc_class()):
                await self._settle_abort(hooks, ctx)
            elif isinstance(exc, Exception):
                await self._settle_error(hooks, ctx, exc)
            raise

    # --- settling ----------------------------------------------------------------------------

    async def _settle_abort(self, hooks: Hooks, ctx: TurnContext) -> None:
        with anyio.move_on_after(self._settle_limit, shield=True):
            await _guarded(hooks.on_abort(ctx), "on_abort", ctx)
        ctx.drain()  # chunks written while aborting are dropped

    async def _settle_error(self, hooks: Hooks, ctx: TurnContext, error: Exception) -> None:
        with anyio.move_on_after(self._settle_limit):
            decision = await _guarded(hooks.on_error(ctx, error), "on_error", ctx)
            if decision == "retry":
                logger.warning(
                    "on_error asked for a retry of conversation %r; a streamed turn is not "
                    "replayed (step retries follow the RetryPolicy)",
                    ctx.conversation_id,
                )
        ctx.drain()

    # --- tools -------------------------------------------------------------------------------

    async def _execute(
        self,
        entry: ToolEntry,
        arguments: Mapping[str, Any],
        call_id: str,
        request: TurnRequest,
        hooks: Hooks,
        ctx: TurnContext,
        history: Sequence[ModelMessage],
    ) -> tuple[Chunk, ToolReturnPart]:
        tool_context = ToolContext(
            conversation_id=request.conversation_id,
            tool_call_id=call_id,
            message_id=request.message_id,
        )
        try:
            output = await execute_tool(
                entry,
                arguments,
                tool_context,
                hooks=hooks,
                ctx=ctx,
                messages=tuple(history),
                clock=self._clock,
            )
        except Exception as error:  # the tool failed: the model sees the error, the turn goes on
            text = str(error) or type(error).__name__
            chunk: Chunk = {"type": "tool-output-error", "toolCallId": call_id, "errorText": text}
            returned = ToolReturnPart(
                tool_name=entry.name, content=text, tool_call_id=call_id, outcome="failed"
            )
            return chunk, returned
        chunk = {"type": "tool-output-available", "toolCallId": call_id, "output": output}
        return chunk, ToolReturnPart(tool_name=entry.name, content=output, tool_call_id=call_id)

    async def _decide(
        self,
        decision: _Decision,
        request: TurnRequest,
        hooks: Hooks,
        ctx: TurnContext,
        history: Sequence[ModelMessage],
    ) -> tuple[Chunk, ToolReturnPart]:
        entry = next((t for t in request.tools if t.name == decision.tool_name), None)
        if not decision.approved:
            chunk: Chunk = {"type": "tool-output-denied", "toolCallId": decision.call_id}
            return chunk, denied_return(decision.tool_name, decision.call_id, decision.reason)
        if entry is None:
            text = f"Tool {decision.tool_name!r} is no longer available."
            chunk = {"type": "tool-output-error", "toolCallId": decision.call_id, "errorText": text}
            call = ParsedToolCall(
                call_id=decision.call_id, tool_name=decision.tool_name, input=None
            )
            return chunk, _failed_return(call, text)
        return await self._execute(
            entry, decision.input, decision.call_id, request, hooks, ctx, history
        )


# --- helpers ---------------------------------------------------------------------------------


async def _guarded(call: Awaitable[_T], hook: str, ctx: TurnContext) -> _T | None:
    """Await a settling hook; a throw is logged and swallowed (cancellation propagates)."""
    try:
        return await call
    except Exception:  # isolation boundary: hook runner (settling must complete)
        logger.exception("hook %s raised while settling conversation %r", hook, ctx.conversation_id)
        return None


class _Decision:
    __slots__ = ("approved", "call_id", "input", "reason", "tool_name")

    def __init__(
        self,
        *,
        call_id: str,
        tool_name: str,
        input: Mapping[str, Any],
        approved: bool,
        reason: str | None,
    ) -> None:
        self.call_id = call_id
        self.tool_name = tool_name
        self.input = input
        self.approved = approved
        self.reason = reason


def _continuation_seed(request: TurnRequest) -> UIMessage | None:
    if not request.messages:
        return None
    last = request.messages[-1]
    if last.get("role") != "assistant":
        return None
    return last


def _decisions(seed: UIMessage) -> list[_Decision]:
    """Return the decided approvals of the seed's last step (undecided ones count as denied)."""
    decisions: list[_Decision] = []
    for part in _last_step(seed.get("parts") or []):
        name = tool_name_of(part)
        if name is None or part.get("providerExecuted"):
            continue
        state = part.get("state")
        if state not in ("approval-responded", "approval-requested"):
            continue
        approval = part.get("approval") or {}
        tool_input = part.get("input")
        decisions.append(
            _Decision(
                call_id=str(part.get("toolCallId", "")),
                tool_name=name,
                input=tool_input if isinstance(tool_input, dict) else {},
                approved=state == "approval-responded" and approval.get("approved") is True,
                reason=approval.get("reason") if state == "approval-responded" else "no decision",
            )
        )
    return decisions


def _last_step(parts: Sequence[dict[str, Any]]) -> Sequence[dict[str, Any]]:
    for index in range(len(parts) - 1, -1, -1):
        if parts[index].get("type") == "step-start":
            return parts[index + 1 :]
    return parts


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


def _failed_return(call: ParsedToolCall, text: str) -> ToolReturnPart:
    return ToolReturnPart(
        tool_name=call.tool_name, content=text, tool_call_id=call.call_id, outcome="failed"
    )


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
