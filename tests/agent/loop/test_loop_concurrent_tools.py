"""The tool calls of one step run concurrently, as the AI SDK runs them (issue 8, point 11).

Each test makes the tools depend on each other through ``anyio.Event``s so that a loop running
them one after another, in call order, can never finish: the first call waits for something only
a later call does. ``fail_after`` turns that deadlock into a failure instead of a hang; on the
concurrent loop nothing ever waits on it (no sleeps, no timing).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import pytest
from loop_support import Script, request, runner_for, types, user
from pydantic_ai.messages import ModelRequest, ToolReturnPart

from drupe.agent.loop import AgentRunner
from drupe.agent.request import ApprovalAsk, TurnRequest
from drupe.chunks.types import Chunk
from drupe.tools.base import ToolContext, ToolEntry

DEADLOCK_BOUND = 10.0
"""Seconds before a sequential loop's deadlock is reported (never reached when concurrent)."""


def async_tool(
    name: str,
    execute: Callable[[Mapping[str, Any], ToolContext], Awaitable[Any]],
    *,
    gated: bool = False,
) -> ToolEntry:
    return ToolEntry(
        name=name,
        description=f"the {name} tool",
        input_schema={"type": "object", "properties": {}},
        execute=execute,
        needs_approval=(lambda args: True) if gated else None,
    )


def two_calls(first: str, second: str) -> Script:
    """Step 1 calls ``first`` (c1) then ``second`` (c2); step 2 answers with text."""
    return Script([[("call", "c1", first, "{}"), ("call", "c2", second, "{}")], ["done"]])


async def run(runner: AgentRunner, req: TurnRequest) -> list[Chunk]:
    with anyio.fail_after(DEADLOCK_BOUND):
        return [chunk async for chunk in runner.stream(req)]


def outputs(chunks: list[Chunk]) -> list[tuple[str, str]]:
    return [
        (c["type"], c["toolCallId"])
        for c in chunks
        if c["type"] in ("tool-output-available", "tool-output-error", "tool-output-denied")
    ]


def returns_seen(script: Script) -> list[ToolReturnPart]:
    """The tool returns the model received with its second request."""
    last = script.seen[1][-1]
    assert isinstance(last, ModelRequest)
    return [p for p in last.parts if isinstance(p, ToolReturnPart)]


async def test_tool_calls_of_one_step_run_concurrently_and_keep_call_order() -> None:
    # c1 ("slow") can only finish after c2 ("fast") has finished: a sequential loop deadlocks.
    fast_done = anyio.Event()
    finished: list[str] = []

    async def slow(args: Mapping[str, Any], ctx: ToolContext) -> str:
        await fast_done.wait()
        finished.append("slow")
        return "slow result"

    async def fast(args: Mapping[str, Any], ctx: ToolContext) -> str:
        finished.append("fast")
        fast_done.set()
        return "fast result"

    script = two_calls("slow", "fast")
    tools = [async_tool("slow", slow), async_tool("fast", fast)]
    chunks = await run(runner_for(script.model()), request([user("go")], tools=tools))

    assert finished == ["fast", "slow"]  # they overlapped: c2 ended while c1 was running
    # results keep call order on the wire and for the model, not completion order
    assert outputs(chunks) == [("tool-output-available", "c1"), ("tool-output-available", "c2")]
    available = [c for c in chunks if c["type"] == "tool-output-available"]
    assert [c["output"] for c in available] == ["slow result", "fast result"]
    seen = returns_seen(script)
    assert [(p.tool_call_id, p.content) for p in seen] == [
        ("c1", "slow result"),
        ("c2", "fast result"),
    ]
    step = types(chunks)
    assert step.index("tool-output-available") < step.index("finish-step")
    assert chunks[-1] == {"type": "finish", "finishReason": "stop"}


async def test_a_failing_tool_does_not_cancel_its_sibling() -> None:
    # c1 fails only once c2 has started, and c2 finishes only after c1 has failed.
    sibling_started = anyio.Event()
    failed = anyio.Event()
    sibling_finished: list[bool] = []

    async def broken(args: Mapping[str, Any], ctx: ToolContext) -> str:
        await sibling_started.wait()
        failed.set()
        raise RuntimeError("disk on fire")

    async def sibling(args: Mapping[str, Any], ctx: ToolContext) -> str:
        sibling_started.set()
        await failed.wait()
        sibling_finished.append(True)
        return "still fine"

    script = two_calls("broken", "sibling")
    tools = [async_tool("broken", broken), async_tool("sibling", sibling)]
    chunks = await run(runner_for(script.model()), request([user("go")], tools=tools))

    assert sibling_finished == [True]
    assert outputs(chunks) == [("tool-output-error", "c1"), ("tool-output-available", "c2")]
    error = next(c for c in chunks if c["type"] == "tool-output-error")
    assert error["errorText"] == "disk on fire"
    seen = returns_seen(script)
    assert [(p.tool_call_id, p.outcome) for p in seen] == [("c1", "failed"), ("c2", "success")]
    assert seen[1].content == "still fine"
    assert chunks[-1] == {"type": "finish", "finishReason": "stop"}


@pytest.mark.parametrize("approved", [True, False])
async def test_an_in_place_approval_gates_its_call_while_the_siblings_run(approved: bool) -> None:
    # The human answers only after the ungated sibling (c2) has finished; the gated call (c1)
    # comes first, so a sequential loop would wait for that decision forever.
    sibling_done = anyio.Event()
    decided = anyio.Event()
    ran: list[str] = []

    async def risky(args: Mapping[str, Any], ctx: ToolContext) -> str:
        assert decided.is_set(), "a gated call ran before its decision"
        ran.append("risky")
        return "risky result"

    async def safe(args: Mapping[str, Any], ctx: ToolContext) -> str:
        ran.append("safe")
        sibling_done.set()
        return "safe result"

    asks: list[ApprovalAsk] = []

    async def approve(ask: ApprovalAsk) -> tuple[bool, str | None]:
        asks.append(ask)
        await sibling_done.wait()
        decided.set()
        return approved, None if approved else "not now"

    script = two_calls("risky", "safe")
    tools = [async_tool("risky", risky, gated=True), async_tool("safe", safe)]
    req = request([user("go")], tools=tools, approve=approve)
    chunks = await run(runner_for(script.model()), req)

    assert [a.tool_call_id for a in asks] == ["c1"]
    ask_chunk = next(c for c in chunks if c["type"] == "tool-approval-request")
    assert ask_chunk["approvalId"] == asks[0].approval_id
    assert types(chunks).index("tool-approval-request") < types(chunks).index(
        "tool-output-available"
    )
    if approved:
        assert ran == ["safe", "risky"]
        assert outputs(chunks) == [
            ("tool-output-available", "c1"),
            ("tool-output-available", "c2"),
        ]
    else:
        assert ran == ["safe"]  # the denied call never ran
        assert outputs(chunks) == [("tool-output-denied", "c1"), ("tool-output-available", "c2")]
    seen = returns_seen(script)
    assert [p.tool_call_id for p in seen] == ["c1", "c2"]
    assert seen[0].outcome == ("success" if approved else "denied")
    assert chunks[-1] == {"type": "finish", "finishReason": "stop"}


async def test_the_approved_calls_of_a_continuation_run_concurrently() -> None:
    # A chat continuation seed with two approved calls: c1 finishes only after c2 has.
    second_done = anyio.Event()

    async def first(args: Mapping[str, Any], ctx: ToolContext) -> str:
        await second_done.wait()
        return "first result"

    async def second(args: Mapping[str, Any], ctx: ToolContext) -> str:
        second_done.set()
        return "second result"

    def approved_part(call_id: str, name: str) -> dict[str, Any]:
        return {
            "type": f"tool-{name}",
            "toolCallId": call_id,
            "state": "approval-responded",
            "input": {},
            "approval": {"id": f"ap-{call_id}", "approved": True},
        }

    seed = {
        "id": "placeholder-1",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            approved_part("c1", "first"),
            approved_part("c2", "second"),
        ],
    }
    script = Script([["both ran"]])
    tools = [async_tool("first", first, gated=True), async_tool("second", second, gated=True)]
    req = request([user("go"), seed], tools=tools)  # type: ignore[list-item]
    chunks = await run(runner_for(script.model()), req)

    assert chunks[1:3] == [
        {"type": "tool-output-available", "toolCallId": "c1", "output": "first result"},
        {"type": "tool-output-available", "toolCallId": "c2", "output": "second result"},
    ]
    assert chunks[-1] == {"type": "finish", "finishReason": "stop"}
