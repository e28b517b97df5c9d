"""Chat approvals: a gated call ends the turn cleanly; a continuation runs or denies the calls."""

from __future__ import annotations

import copy
from typing import Any

from loop_support import Recorder, Script, collect, request, runner_for, tool, types, user
from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart

from drupe.chunks.accumulate import accumulate
from drupe.chunks.types import UIMessage


def _tools(calls: list[dict[str, Any]]) -> list[Any]:
    def delete(args: Any, ctx: Any) -> Any:
        calls.append({"tool": "delete", "args": dict(args), "call": ctx.tool_call_id})
        return {"deleted": args["path"]}

    def look(args: Any, ctx: Any) -> Any:
        calls.append({"tool": "look", "args": dict(args), "call": ctx.tool_call_id})
        return "3 files"

    return [
        tool("delete", delete, needs_approval=lambda args: args.get("path") != "/tmp/scratch"),
        tool("look", look),
    ]


def _decide(message: UIMessage, decisions: dict[str, tuple[bool, str | None]]) -> UIMessage:
    """What the decision API does to the row: mark each decided approval as responded."""
    seed = copy.deepcopy(message)
    for part in seed["parts"]:
        call_id = part.get("toolCallId")
        if part.get("state") == "approval-requested" and call_id in decisions:
            approved, reason = decisions[call_id]
            part["state"] = "approval-responded"
            part["approval"] = {**part["approval"], "approved": approved}
            if reason:
                part["approval"]["reason"] = reason
    return seed


async def test_gated_call_ends_the_turn_cleanly_with_an_approval_request() -> None:
    calls: list[dict[str, Any]] = []
    log: list[tuple[str, str, Any]] = []
    script = Script([[("call", "c1", "delete", '{"path": "/home"}'), ("call", "c2", "look", "{}")]])
    chunks = await collect(
        runner_for(script.model()),
        request([user("clean up")], tools=_tools(calls), hooks=[Recorder("r", log)]),
    )
    assert (
        types(chunks)[-6:]
        == [
            "tool-input-available",
            "tool-approval-request",
            "tool-output-available",  # the ungated call of the same step still runs
            "finish-step",
            "message-metadata",
            "finish",
        ][-6:]
    )
    request_chunk = next(c for c in chunks if c["type"] == "tool-approval-request")
    assert request_chunk["toolCallId"] == "c1"
    assert request_chunk["approvalId"].startswith("approval_")
    assert chunks[-1] == {"type": "finish", "finishReason": "tool-calls"}
    assert [c["tool"] for c in calls] == ["look"]  # the gated call did not run
    finished = [detail for _, hook, detail in log if hook == "on_finish"]
    assert finished[0].awaiting_approval is True

    message = accumulate(chunks)
    states = {p["toolCallId"]: p["state"] for p in message["parts"] if "toolCallId" in p}
    assert states == {"c1": "approval-requested", "c2": "output-available"}


async def test_continuation_executes_approved_and_denies_denied_calls_then_continues() -> None:
    calls: list[dict[str, Any]] = []
    tools = _tools(calls)
    first = Script(
        [
            [
                ("call", "c1", "delete", '{"path": "/home"}'),
                ("call", "c2", "delete", '{"path": "/etc"}'),
                ("call", "c3", "look", "{}"),
            ]
        ]
    )
    turn1 = await collect(runner_for(first.model()), request([user("clean up")], tools=tools))
    row = accumulate(turn1)
    assert row["id"] == "placeholder-1"

    seed = _decide(row, {"c1": (True, None), "c2": (False, "keep /etc")})
    history = [user("clean up"), seed]
    second = Script([["Deleted /home, kept /etc."]])
    turn2 = await collect(
        runner_for(second.model()),
        request(history, tools=tools, message_id=seed["id"]),
    )

    assert turn2[0] == {"type": "start", "messageId": "placeholder-1"}
    assert types(turn2)[1:3] == ["tool-output-available", "tool-output-denied"]
    assert turn2[1] == {
        "type": "tool-output-available",
        "toolCallId": "c1",
        "output": {"deleted": "/home"},
    }
    assert turn2[2] == {"type": "tool-output-denied", "toolCallId": "c2"}
    assert types(turn2)[3] == "start-step"
    assert turn2[-1] == {"type": "finish", "finishReason": "stop"}
    assert [(c["tool"], c["call"]) for c in calls] == [("look", "c3"), ("delete", "c1")]

    # the model saw the three calls answered: the earlier result, the approved run, the denial
    sent = second.seen[0]
    response = next(m for m in sent if isinstance(m, ModelResponse))
    assert [p.tool_call_id for p in response.parts if isinstance(p, ToolCallPart)] == [
        "c1",
        "c2",
        "c3",
    ]
    returns = [
        p
        for m in sent
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]
    by_id = {p.tool_call_id: p for p in returns}
    assert set(by_id) == {"c1", "c2", "c3"}
    assert by_id["c1"].content == {"deleted": "/home"}
    assert by_id["c2"].outcome == "denied"
    assert "keep /etc" in str(by_id["c2"].content)
    assert by_id["c3"].content == "3 files"

    final = accumulate(turn2, seed=seed)
    assert final["id"] == "placeholder-1"
    states = {p["toolCallId"]: p["state"] for p in final["parts"] if "toolCallId" in p}
    assert states == {"c1": "output-available", "c2": "output-denied", "c3": "output-available"}
    assert final["parts"][-1] == {
        "type": "text",
        "text": "Deleted /home, kept /etc.",
        "state": "done",
    }


async def test_approval_predicate_that_throws_is_gated() -> None:
    def broken(args: Any) -> bool:
        raise KeyError("path")

    calls: list[str] = []
    gated = tool("wipe", lambda a, c: calls.append("ran"), needs_approval=broken)
    script = Script([[("call", "c1", "wipe", "{}")]])
    chunks = await collect(runner_for(script.model()), request([user("x")], tools=[gated]))
    assert "tool-approval-request" in types(chunks)
    assert calls == []
