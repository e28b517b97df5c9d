"""The two agent-loop seams the in-process driver relies on, at the loop level.

``TurnRequest.inject`` is polled only between steps that continue the turn, and what it returns
joins the SAME model request as the step's tool returns; ``TurnRequest.approve`` decides a gated
call in place (approved runs it, denied answers ``tool-output-denied``, the turn goes on).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from drupe.agent.loop import AgentRunner
from drupe.agent.request import ApprovalAsk, TurnRequest
from drupe.chunks.types import Chunk, UIMessage
from drupe.tools.base import ToolContext, ToolEntry
from tests.sessions.inprocess.support import user


@dataclass
class TwoSteps:
    """Step 1 calls ``probe``; later steps answer with text. Records every request."""

    seen: list[list[ModelMessage]] = field(default_factory=list)

    def model(self) -> FunctionModel:
        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
            self.seen.append(list(messages))
            if len(self.seen) == 1:
                yield {0: DeltaToolCall(name="probe", json_args="{}", tool_call_id="c1")}
            else:
                yield "done"

        def unary(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            raise AssertionError("the loop always streams")

        return FunctionModel(unary, stream_function=stream, model_name="two-steps")


def _probe(calls: list[str], *, gated: bool = False) -> ToolEntry:
    async def execute(arguments: Mapping[str, Any], context: ToolContext) -> Any:
        calls.append(context.tool_call_id)
        return "probed"

    return ToolEntry(
        name="probe",
        description="probe",
        input_schema={"type": "object", "properties": {}},
        execute=execute,
        needs_approval=(lambda _args: True) if gated else None,
    )


async def _run(model: TwoSteps, **kwargs: Any) -> list[Chunk]:
    runner = AgentRunner(lambda model_id: model.model())
    request = TurnRequest(
        conversation_id="agent-session:s1",
        message_id="m1",
        model_id="two-steps",
        messages=[user("start")],
        **kwargs,
    )
    return [chunk async for chunk in runner.stream(request)]


async def test_inject_joins_the_tool_returns_of_the_step_before_the_next_request() -> None:
    model, calls, polls = TwoSteps(), [], []
    steer: UIMessage = user("change of plan", "u2")

    def inject() -> list[UIMessage]:
        polls.append(len(model.seen))
        return [steer] if len(polls) == 1 else []

    chunks = await _run(model, tools=[_probe(calls)], inject=inject)

    assert polls == [1]  # once, after step 1; never before step 1 nor after the last step
    assert chunks[-1] == {"type": "finish", "finishReason": "stop"}
    second = model.seen[1]
    last = second[-1]
    assert isinstance(last, ModelRequest)
    kinds = [type(part) for part in last.parts]
    assert kinds == [ToolReturnPart, UserPromptPart]
    prompt = last.parts[1]
    assert isinstance(prompt, UserPromptPart) and isinstance(prompt.content, str)
    assert prompt.content.startswith("<system-reminder>") and "change of plan" in prompt.content


async def test_approve_in_place_runs_an_approved_call_and_the_turn_goes_on() -> None:
    model, calls, asks = TwoSteps(), [], []

    async def approve(ask: ApprovalAsk) -> tuple[bool, str | None]:
        asks.append(ask)
        return True, None

    chunks = await _run(model, tools=[_probe(calls, gated=True)], approve=approve)

    types = [c["type"] for c in chunks]
    assert types.index("tool-approval-request") < types.index("tool-output-available")
    assert calls == ["c1"] and [a.tool_name for a in asks] == ["probe"]
    assert asks[0].approval_id == next(
        c["approvalId"] for c in chunks if c["type"] == "tool-approval-request"
    )
    assert len(model.seen) == 2 and chunks[-1]["finishReason"] == "stop"


async def test_approve_in_place_denied_is_tool_output_denied_and_the_model_is_told() -> None:
    model, calls = TwoSteps(), []

    async def deny(ask: ApprovalAsk) -> tuple[bool, str | None]:
        return False, "not today"

    chunks = await _run(model, tools=[_probe(calls, gated=True)], approve=deny)

    assert calls == []
    assert {"type": "tool-output-denied", "toolCallId": "c1"} in chunks
    returned = model.seen[1][-1]
    assert isinstance(returned, ModelRequest)
    part = returned.parts[0]
    assert isinstance(part, ToolReturnPart) and part.outcome == "denied"
    assert "not today" in str(part.content)
    assert chunks[-1]["finishReason"] == "stop"
