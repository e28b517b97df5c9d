"""Shared test kit for the agent loop tests: scripted FunctionModels, tools and recording hooks.

Models are pydantic-ai ``FunctionModel``s (real ``Model`` implementations) given both
``function`` and ``stream_function``; each call of the model pops the next scripted reply.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, DeltaThinkingPart, DeltaToolCall, FunctionModel

from drupe.agent.hooks import (
    Hooks,
    StepOverrides,
    StepPlan,
    StepResult,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnContext,
    TurnResult,
)
from drupe.agent.loop import AgentRunner
from drupe.agent.request import TurnRequest
from drupe.chunks.types import Chunk, UIMessage
from drupe.tools.base import ToolContext, ToolEntry

Reply = Sequence[Any]
"""One scripted model reply: ``str`` text deltas, ``("think", text)``, ``("call", id, name,
json)`` starting a tool call, ``("args", json)`` continuing it, or an exception instance to raise
at that point."""


@dataclass
class Script:
    """A FunctionModel that answers each request with the next reply, and records what it saw."""

    replies: list[Reply]
    seen: list[list[ModelMessage]] = field(default_factory=list)
    infos: list[AgentInfo] = field(default_factory=list)

    def model(self) -> FunctionModel:
        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
            self.seen.append(list(messages))
            self.infos.append(info)
            reply = self.replies.pop(0)
            tool_index = 100
            for item in reply:
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, str):
                    yield item
                elif item[0] == "think":
                    yield {0: DeltaThinkingPart(content=item[1])}
                elif item[0] == "call":
                    _, call_id, name, args = item
                    tool_index += 1
                    yield {
                        tool_index: DeltaToolCall(name=name, json_args=args, tool_call_id=call_id)
                    }
                elif item[0] == "args":
                    yield {tool_index: DeltaToolCall(json_args=item[1])}
                else:  # pragma: no cover - test authoring error
                    raise AssertionError(item)

        def unary(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            raise AssertionError("the loop always streams")

        return FunctionModel(unary, stream_function=stream, model_name="scripted")


def runner_for(model: FunctionModel, **kwargs: Any) -> AgentRunner:
    """A runner whose every model id resolves to ``model``."""
    return AgentRunner(lambda model_id: model, **kwargs)


def user(text: str, message_id: str = "u1") -> UIMessage:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def request(messages: Sequence[UIMessage], **kwargs: Any) -> TurnRequest:
    base: dict[str, Any] = {
        "conversation_id": "c1",
        "message_id": "placeholder-1",
        "model_id": "test:scripted",
        "messages": list(messages),
    }
    base.update(kwargs)
    return TurnRequest(**base)


async def collect(runner: AgentRunner, req: TurnRequest) -> list[Chunk]:
    return [chunk async for chunk in runner.stream(req)]


def types(chunks: Sequence[Chunk]) -> list[str]:
    return [chunk["type"] for chunk in chunks]


def tool(
    name: str,
    execute: Callable[[Mapping[str, Any], ToolContext], Any],
    *,
    needs_approval: Callable[[Mapping[str, Any]], bool] | None = None,
) -> ToolEntry:
    async def run(args: Mapping[str, Any], ctx: ToolContext) -> Any:
        return execute(args, ctx)

    return ToolEntry(
        name=name,
        description=f"the {name} tool",
        input_schema={"type": "object", "properties": {}},
        execute=run,
        needs_approval=needs_approval,
    )


def add_tool() -> ToolEntry:
    return tool("add", lambda args, ctx: {"sum": args["a"] + args["b"]})


class Recorder(Hooks):
    """Records every hook call as ``(label, hook, detail)`` into a shared log."""

    def __init__(self, label: str, log: list[tuple[str, str, Any]], *, raises: bool = False):
        self.label = label
        self.log = log
        self.raises = raises

    def _note(self, hook: str, detail: Any = None) -> None:
        self.log.append((self.label, hook, detail))
        if self.raises:
            raise RuntimeError(f"{self.label} {hook} failed")

    async def on_start(self, ctx: TurnContext) -> None:
        self._note("on_start")

    async def prepare_step(self, ctx: TurnContext, plan: StepPlan) -> StepOverrides | None:
        self._note("prepare_step", plan.step_number)
        return None

    async def on_step_finish(self, ctx: TurnContext, step: StepResult) -> None:
        self._note("on_step_finish", step.step_number)

    async def on_tool_execution_start(self, ctx: TurnContext, event: ToolExecutionStart) -> None:
        self._note("on_tool_execution_start", event.call_id)

    async def on_tool_execution_end(self, ctx: TurnContext, event: ToolExecutionEnd) -> None:
        self._note("on_tool_execution_end", event)

    async def on_finish(self, ctx: TurnContext, result: TurnResult) -> None:
        self._note("on_finish", result)

    async def on_abort(self, ctx: TurnContext) -> None:
        self._note("on_abort")

    async def on_error(self, ctx: TurnContext, error: BaseException) -> Any:
        self._note("on_error", error)
        return None
