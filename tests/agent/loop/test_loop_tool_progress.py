"""A running tool's progress reaches ``TurnRequest.progress`` at once, and only while it runs.

The consumer merges the reports into the yielded chunks (as the in-process driver does); the
tools wait on the test so that a report that came late (with the step's outputs) would be seen
after the tool was released, which the tests rule out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
from loop_support import Script, request, runner_for, user

from drupe.chunks.types import Chunk
from drupe.tools.base import ToolContext, ToolEntry


def _tool(name: str, execute: Any) -> ToolEntry:
    return ToolEntry(
        name=name,
        description=name,
        input_schema={"type": "object", "properties": {}},
        execute=execute,
    )


async def test_reports_come_at_once_as_preliminary_outputs_of_the_call_then_the_final() -> None:
    merged: list[Chunk] = []
    seen_first = anyio.Event()
    kept: list[ToolContext] = []

    def sink(chunk: Chunk) -> None:
        merged.append(chunk)
        seen_first.set()

    async def fetch(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, int]:
        kept.append(ctx)
        ctx.progress({"done": 1})
        await seen_first.wait()  # only a report delivered at once lets the tool go on
        ctx.progress({"done": 2})
        return {"done": 3}

    script = Script([[("call", "c1", "fetch", "{}")], ["ok"]])
    req = request([user("go")], tools=[_tool("fetch", fetch)], progress=sink)
    with anyio.fail_after(10):
        async for chunk in runner_for(script.model()).stream(req):
            merged.append(chunk)
    kept[0].progress({"done": 4})  # after the call ended: dropped

    calls = [c for c in merged if c.get("toolCallId") == "c1"]
    assert [c["type"] for c in calls][-3:] == ["tool-output-available"] * 3
    assert calls[-3:] == [
        {"type": "tool-output-available", "toolCallId": "c1", "output": {"done": 1},
         "preliminary": True},
        {"type": "tool-output-available", "toolCallId": "c1", "output": {"done": 2},
         "preliminary": True},
        {"type": "tool-output-available", "toolCallId": "c1", "output": {"done": 3}},
    ]  # fmt: skip
    assert calls[0]["type"] == "tool-input-start"
    # the model got the final output only
    assert "'done': 3" in str(script.seen[1][-1]) and "'done': 2" not in str(script.seen[1][-1])


async def test_without_a_sink_or_with_a_failing_one_the_call_is_unaffected() -> None:
    async def chatty(args: Mapping[str, Any], ctx: ToolContext) -> str:
        ctx.progress({"half": True})
        return "whole"

    def broken(chunk: Chunk) -> None:
        raise RuntimeError("the consumer is gone")

    for extra in ({}, {"progress": broken}):
        script = Script([[("call", "c1", "chatty", "{}")], ["ok"]])
        req = request([user("go")], tools=[_tool("chatty", chatty)], **extra)
        chunks = [c async for c in runner_for(script.model()).stream(req)]
        outputs = [c for c in chunks if c["type"].startswith("tool-output")]
        assert outputs == [{"type": "tool-output-available", "toolCallId": "c1", "output": "whole"}]
        assert chunks[-1] == {"type": "finish", "finishReason": "stop"}
