"""Hooks of the agent loop, their composition, and the tool execution wrapper.

``Hooks`` is the in-tree family every observer and feature subclasses; every hook is a no-op by
default (the template is pydantic-ai's ``AbstractCapability``). The loop calls one composed
``Hooks`` built by ``compose_hooks(observers, features)``:

- 0 parts -> ``NOOP_HOOKS``; 1 part -> that part as-is; more -> ``ComposedHooks``.
- Void hooks (``on_start``, ``on_step_finish``, ``on_tool_execution_start``,
  ``on_tool_execution_end``, ``on_finish``, ``on_abort``) run sequentially: observers first,
  then features, each group in registration order. A throw is logged and swallowed; the next
  hook still runs.
- ``prepare_step`` threads ``messages`` forward (each hook sees the messages the previous one
  returned) and shallow-merges every returned key, last writer wins. A throw is logged and
  counts as "no change".
- ``on_error`` runs every handler; a throwing handler counts as ``"abort"``; the result is
  ``"retry"`` if any handler returned ``"retry"``, else ``"abort"``.

Which hooks see what:
- ``on_finish`` runs only when the turn finished cleanly (a ``finish`` chunk follows).
- ``on_abort`` runs when the turn is cancelled or its consumer closed it; ``on_error`` never
  runs for a cancellation. Exactly one of ``on_finish`` / ``on_error`` / ``on_abort`` runs.
- Tool hooks run around the execution of a function tool only, never for denied or
  approval-gated calls.

Hooks write chunks with ``TurnContext.write``; the loop emits them after the hook returns (and
drops them when the turn was aborted). A hook must never block the loop for long: it runs inline.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from drupe.chunks.types import Chunk
from drupe.tools.base import ToolContext, ToolEntry

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.usage import RequestUsage

    from drupe.agent.request import TurnRequest

__all__ = [
    "NOOP_HOOKS",
    "ComposedHooks",
    "ErrorDecision",
    "Hooks",
    "StepOverrides",
    "StepPlan",
    "StepResult",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolOutput",
    "TurnContext",
    "TurnResult",
    "compose_hooks",
    "execute_tool",
]

logger = logging.getLogger(__name__)

ErrorDecision = Literal["retry", "abort"]


@dataclass(slots=True, kw_only=True)
class TurnContext:
    """What every hook sees of the running turn; ``write`` queues a chunk for the stream."""

    request: TurnRequest
    step_number: int = 0
    """Number of the current (or last completed) step, 1-based; 0 before the first step."""
    _outbox: list[Chunk] = field(default_factory=list, repr=False)

    @property
    def conversation_id(self) -> str:
        return self.request.conversation_id

    @property
    def message_id(self) -> str:
        return self.request.message_id

    @property
    def model_id(self) -> str:
        return self.request.model_id

    def write(self, chunk: Chunk) -> None:
        """Queue ``chunk``; the loop emits it right after the current hook call (never blocks)."""
        self._outbox.append(chunk)

    def drain(self) -> list[Chunk]:
        """Return and forget the queued chunks (the loop calls this)."""
        queued, self._outbox = self._outbox, []
        return queued


@dataclass(frozen=True, slots=True, kw_only=True)
class StepPlan:
    """What the next model request will send, before ``prepare_step`` adjusts it."""

    step_number: int
    messages: tuple[ModelMessage, ...]
    tools: tuple[ToolEntry, ...]
    system: str | None
    model_settings: Mapping[str, Any] | None


class StepOverrides(TypedDict, total=False):
    """Keys a ``prepare_step`` hook may return; each replaces the plan's value for this step."""

    messages: Sequence[ModelMessage]
    tools: Sequence[ToolEntry]
    system: str | None
    model_settings: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class StepResult:
    """One completed step (model request, plus the tools it ran)."""

    step_number: int
    response: ModelResponse
    usage: RequestUsage
    finish_reason: str
    """UI finish reason of the model response (``stop``, ``tool-calls``, ``length``, ...)."""
    tool_calls: int
    """Function tool calls the model made in this step."""


class ToolResultOutput(TypedDict):
    type: Literal["tool-result"]
    output: Any


class ToolErrorOutput(TypedDict):
    type: Literal["tool-error"]
    error: BaseException


ToolOutput = ToolResultOutput | ToolErrorOutput


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecutionStart:
    call_id: str
    tool_name: str
    input: Mapping[str, Any]
    messages: tuple[ModelMessage, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecutionEnd:
    call_id: str
    tool_name: str
    input: Mapping[str, Any]
    messages: tuple[ModelMessage, ...]
    duration_ms: float
    """Time spent in ``execute`` only (monotonic; hook latency excluded)."""
    tool_output: ToolOutput


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnResult:
    """How a cleanly finished turn ended (passed to ``on_finish``)."""

    finish_reason: str
    steps: int
    tool_calls: int
    yielded_to_steer: bool = False
    awaiting_approval: bool = False


class Hooks:
    """Every loop hook, each a no-op by default. Subclass and override what you need.

    All hooks run in the task that consumes the turn's chunk stream. They may raise: the
    composition logs and swallows (see the module docstring). Cancellation is never swallowed.
    """

    async def on_start(self, ctx: TurnContext) -> None:
        """Run once, after the ``start`` chunk and before the first step."""

    async def prepare_step(self, ctx: TurnContext, plan: StepPlan) -> StepOverrides | None:
        """Adjust the next model request; return only the keys to change (or ``None``)."""
        return None

    async def on_step_finish(self, ctx: TurnContext, step: StepResult) -> None:
        """Run after every completed step, after its ``finish-step`` chunk."""

    async def on_tool_execution_start(self, ctx: TurnContext, event: ToolExecutionStart) -> None:
        """Run before a function tool's ``execute``; not timed."""

    async def on_tool_execution_end(self, ctx: TurnContext, event: ToolExecutionEnd) -> None:
        """Run after ``execute`` returned or raised; an error is passed on after this hook."""

    async def on_finish(self, ctx: TurnContext, result: TurnResult) -> None:
        """Run on a clean finish only, before the ``finish`` chunk."""

    async def on_abort(self, ctx: TurnContext) -> None:
        """Run when the turn was cancelled (shielded, time-bounded); its chunks are dropped."""

    async def on_error(self, ctx: TurnContext, error: BaseException) -> ErrorDecision | None:
        """Run when the turn failed; return ``"retry"`` to ask for a retry (advisory)."""
        return None


NOOP_HOOKS = Hooks()
"""The composition of zero hooks."""


def compose_hooks(observers: Iterable[Hooks], features: Iterable[Hooks]) -> Hooks:
    """Fold ``observers`` then ``features`` into one ``Hooks`` (rules in the module docstring)."""
    parts = (*observers, *features)
    if not parts:
        return NOOP_HOOKS
    if len(parts) == 1:
        return parts[0]
    return ComposedHooks(parts)


class ComposedHooks(Hooks):
    """Several hooks run in order as one; see the module docstring for the folding rules."""

    __slots__ = ("parts",)

    def __init__(self, parts: Sequence[Hooks]) -> None:
        self.parts: tuple[Hooks, ...] = tuple(parts)

    async def on_start(self, ctx: TurnContext) -> None:
        for part in self.parts:
            try:
                await part.on_start(ctx)
            except Exception as exc:  # isolation boundary: hook runner
                _log_hook_error("on_start", part, ctx, exc)

    async def prepare_step(self, ctx: TurnContext, plan: StepPlan) -> StepOverrides | None:
        merged: dict[str, Any] = {}
        current = plan
        for part in self.parts:
            try:
                returned = await part.prepare_step(ctx, current)
            except Exception as exc:  # isolation boundary: hook runner
                _log_hook_error("prepare_step", part, ctx, exc)
                continue
            if not returned:
                continue
            merged.update(returned)
            if "messages" in returned:
                current = dataclasses.replace(current, messages=tuple(returned["messages"]))
        return StepOverrides(**merged) if merged else None  # type: ignore[typeddict-item]

    async def on_step_finish(self, ctx: TurnContext, step: StepResult) -> None:
        for part in self.parts:
            try:
                await part.on_step_finish(ctx, step)
            except Exception as exc:  # isolation boundary: hook runner
                _log_hook_error("on_step_finish", part, ctx, exc)

    async def on_tool_execution_start(self, ctx: TurnContext, event: ToolExecutionStart) -> None:
        for part in self.parts:
            try:
                await part.on_tool_execution_start(ctx, event)
            except Exception as exc:  # isolation boundary: hook runner
                _log_hook_error("on_tool_execution_start", part, ctx, exc)

    async def on_tool_execution_end(self, ctx: TurnContext, event: ToolExecutionEnd) -> None:
        for part in self.parts:
            try:
                await part.on_tool_execution_end(ctx, event)
            except Exception as exc:  # isolation boundary: hook runner
                _log_hook_error("on_tool_execution_end", part, ctx, exc)

    async def on_finish(self, ctx: TurnContext, result: TurnResult) -> None:
        for part in self.parts:
            try:
                await part.on_finish(ctx, result)
            except Exception as exc:  # isolation boundary: hook runner
                _log_hook_error("on_finish", part, ctx, exc)

    async def on_abort(self, ctx: TurnContext) -> None:
        for part in self.parts:
            try:
                await part.on_abort(ctx)
            except Exception as exc:  # isolation boundary: hook runner
                _log_hook_error("on_abort", part, ctx, exc)

    async def on_error(self, ctx: TurnContext, error: BaseException) -> ErrorDecision | None:
        decision: ErrorDecision = "abort"
        for part in self.parts:
            try:
                returned = await part.on_error(ctx, error)
            except Exception as exc:  # isolation boundary: a throwing handler counts as "abort"
                _log_hook_error("on_error", part, ctx, exc)
                continue
            if returned == "retry":
                decision = "retry"
        return decision


async def execute_tool(
    entry: ToolEntry,
    arguments: Mapping[str, Any],
    tool_context: ToolContext,
    *,
    hooks: Hooks,
    ctx: TurnContext,
    messages: tuple[ModelMessage, ...],
    clock: Callable[[], float],
) -> Any:
    """Run ``entry.execute`` between the tool hooks; return its output or re-raise its error.

    ``on_tool_execution_start`` is awaited first (a throw is logged and swallowed), only
    ``execute`` is timed, and ``on_tool_execution_end`` sees the result or the error before the
    error is passed on. Cancellation skips the end hook and propagates.
    """
    call_id = tool_context.tool_call_id
    start = ToolExecutionStart(
        call_id=call_id, tool_name=entry.name, input=arguments, messages=messages
    )
    try:
        await hooks.on_tool_execution_start(ctx, start)
    except Exception as exc:  # isolation boundary: hook runner
        _log_hook_error("on_tool_execution_start", hooks, ctx, exc)
    started = clock()
    try:
        output = await entry.execute(arguments, tool_context)
    except Exception as error:
        duration_ms = (clock() - started) * 1000
        await _tool_end(
            hooks, ctx, start, duration_ms, ToolErrorOutput(type="tool-error", error=error)
        )
        raise
    duration_ms = (clock() - started) * 1000
    await _tool_end(
        hooks, ctx, start, duration_ms, ToolResultOutput(type="tool-result", output=output)
    )
    return output


async def _tool_end(
    hooks: Hooks,
    ctx: TurnContext,
    start: ToolExecutionStart,
    duration_ms: float,
    tool_output: ToolOutput,
) -> None:
    event = ToolExecutionEnd(
        call_id=start.call_id,
        tool_name=start.tool_name,
        input=start.input,
        messages=start.messages,
        duration_ms=duration_ms,
        tool_output=tool_output,
    )
    try:
        await hooks.on_tool_execution_end(ctx, event)
    except Exception as exc:  # isolation boundary: hook runner
        _log_hook_error("on_tool_execution_end", hooks, ctx, exc)


def _log_hook_error(hook: str, part: Hooks, ctx: TurnContext, error: Exception) -> None:
    logger.error(
        "hook %s of %s raised (conversation %r, message %r); ignored",
        hook,
        type(part).__name__,
        ctx.conversation_id,
        ctx.message_id,
        exc_info=error,
    )
