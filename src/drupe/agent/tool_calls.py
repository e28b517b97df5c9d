"""The tool calls of a step: run concurrently, gated by approvals, one outcome per call.

Owns: ``ToolCall`` (a call to run and the in-place approval it awaits), ``ToolCalls`` (runs a
step's calls and answers a continuation seed's decisions for ``drupe.agent.loop``) and
``failed_return``. An outcome is the call's output chunk and the part the model sees.

Contract:
- ``run`` runs the calls concurrently in one task group and returns their outcomes in call
  order. A gated call awaits its decision first (denied: ``tool-output-denied``, never
  executed). A tool that raises ends only its own call (``tool-output-error``, the model sees
  the error); an approval callback that raises fails the step: its siblings are cancelled and
  the error is raised.
- ``answer_decisions`` runs the approved calls of a continuation seed concurrently, denies the
  others, answers a call whose tool is gone with ``tool-output-error``, yields the chunks hooks
  wrote meanwhile, then one chunk per decision in order, and appends the returns to the history.
- A running tool's progress reports go to ``request.progress`` at once, as preliminary
  ``tool-output-available`` chunks of its call (plain JSON), and only while the call runs: a
  report after the call ended (or without ``request.progress``) is dropped. A consumer that
  raises loses the report, never the call.
- Never yields inside the task group (the group is entered and left between two yields).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelRequestPart, ToolReturnPart
from pydantic_core import to_jsonable_python

from drupe.agent.convert import ApprovalDecision, denied_return
from drupe.agent.hooks import ComposedHooks, TurnContext, execute_tool
from drupe.agent.request import ApprovalAsk, TurnRequest
from drupe.chunks.types import Chunk
from drupe.tools.base import ToolContext, ToolEntry

__all__ = ["Outcome", "ToolCall", "ToolCalls", "failed_return"]

logger = logging.getLogger(__name__)

Outcome = tuple[Chunk, ModelRequestPart]
"""A call's output chunk and the part the model sees."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call to run: its tool, input and id, and the in-place approval it awaits."""

    entry: ToolEntry
    input: Mapping[str, Any]
    call_id: str
    ask: ApprovalAsk | None = None


def failed_return(tool_name: str, call_id: str, text: str) -> ToolReturnPart:
    """The part a failed call returns to the model (its error text, outcome ``failed``)."""
    return ToolReturnPart(tool_name=tool_name, content=text, tool_call_id=call_id, outcome="failed")


@dataclass(slots=True)
class ToolCalls:
    """Runs tool calls for one turn (its request, context, hooks and clock)."""

    request: TurnRequest
    ctx: TurnContext
    hooks: ComposedHooks
    clock: Callable[[], float]

    async def answer_decisions(
        self, decisions: list[ApprovalDecision], history: list[ModelMessage]
    ) -> AsyncGenerator[Chunk, None]:
        """Run the approved calls of a continuation seed (concurrently) and deny the others."""
        tools = {entry.name: entry for entry in self.request.tools}
        answered: list[Outcome | None] = []
        jobs: list[ToolCall] = []
        for decision in decisions:
            call_id, name = decision.call_id, decision.tool_name
            entry = tools.get(name)
            if not decision.approved:
                chunk: Chunk = {"type": "tool-output-denied", "toolCallId": call_id}
                answered.append((chunk, denied_return(name, call_id, decision.reason)))
            elif entry is None:
                text = f"Tool {name!r} is no longer available."
                chunk = {"type": "tool-output-error", "toolCallId": call_id, "errorText": text}
                answered.append((chunk, failed_return(name, call_id, text)))
            else:
                answered.append(None)
                jobs.append(ToolCall(entry, decision.input, call_id))
        ran = iter(await self.run(jobs, history))
        for queued in self.ctx.drain():
            yield queued
        returns: list[ModelRequestPart] = []
        for slot in answered:
            chunk, returned = slot if slot is not None else next(ran)
            yield chunk
            returns.append(returned)
        if returns:
            history.append(ModelRequest(parts=returns))

    async def run(
        self, calls: Sequence[ToolCall], history: Sequence[ModelMessage]
    ) -> list[Outcome]:
        """Run ``calls`` concurrently in one task group; return their outcomes in call order."""
        outcomes: list[Outcome | None] = [None] * len(calls)
        failures: list[Exception] = []

        async def run(index: int, call: ToolCall, scope: anyio.CancelScope) -> None:
            try:
                outcomes[index] = await self._gate_and_execute(call, history)
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

    async def _gate_and_execute(self, call: ToolCall, history: Sequence[ModelMessage]) -> Outcome:
        if call.ask is not None:
            assert self.request.approve is not None  # an ask is only made with a callback
            approved, reason = await self.request.approve(call.ask)
            if not approved:
                chunk: Chunk = {"type": "tool-output-denied", "toolCallId": call.call_id}
                return chunk, denied_return(call.entry.name, call.call_id, reason)
        return await self._execute(call.entry, call.input, call.call_id, history)

    async def _execute(
        self,
        entry: ToolEntry,
        arguments: Mapping[str, Any],
        call_id: str,
        history: Sequence[ModelMessage],
    ) -> tuple[Chunk, ToolReturnPart]:
        """Run one tool through the hook wrapper; its error becomes ``tool-output-error``."""
        reporter = _ProgressReporter(self.request.progress, call_id)
        tool_context = ToolContext(
            conversation_id=self.request.conversation_id,
            tool_call_id=call_id,
            message_id=self.request.message_id,
            progress=reporter.report,
        )
        try:
            output = await execute_tool(
                entry,
                arguments,
                tool_context,
                hooks=self.hooks,
                ctx=self.ctx,
                messages=tuple(history),
                clock=self.clock,
            )
        except Exception as error:  # the tool failed: the model sees the error, the turn goes on
            text = str(error) or type(error).__name__
            chunk: Chunk = {"type": "tool-output-error", "toolCallId": call_id, "errorText": text}
            return chunk, failed_return(entry.name, call_id, text)
        finally:
            reporter.close()
        chunk = {
            "type": "tool-output-available",
            "toolCallId": call_id,
            "output": to_jsonable_python(output, fallback=repr),  # chunks are plain JSON
        }
        return chunk, ToolReturnPart(tool_name=entry.name, content=output, tool_call_id=call_id)


class _ProgressReporter:
    """One call's ``ToolContext.progress``: live while the call runs, silent once closed."""

    __slots__ = ("_call_id", "_sink")

    def __init__(self, sink: Callable[[Chunk], None] | None, call_id: str) -> None:
        self._sink = sink
        self._call_id = call_id

    def report(self, output: Any) -> None:
        sink = self._sink
        if sink is None:
            return
        chunk: Chunk = {
            "type": "tool-output-available",
            "toolCallId": self._call_id,
            "output": to_jsonable_python(output, fallback=repr),
            "preliminary": True,
        }
        try:
            sink(chunk)
        except Exception:  # isolation boundary: a failing consumer loses the report only
            logger.warning("progress of tool call %r not delivered", self._call_id, exc_info=True)

    def close(self) -> None:
        self._sink = None
