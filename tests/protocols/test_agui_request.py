"""``drupe.protocols.agui.request.plan_run``: what a RunAgentInput asks for, or why not."""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import RunAgentInput

from drupe.protocols.agui.request import (
    Approvals,
    BadRunInput,
    ToolResults,
    UserTurn,
    client_tools,
    plan_run,
)
from drupe.tools.client_tools import MAX_TOOLS, ClientTool


def _input(**fields: Any) -> RunAgentInput:
    return RunAgentInput.model_validate({"threadId": "t", "runId": "r", "messages": [], **fields})


def test_only_the_last_user_message_is_read() -> None:
    plan = plan_run(
        _input(
            messages=[
                {"id": "1", "role": "user", "content": "old"},
                {"id": "2", "role": "assistant", "content": "answer"},
                {"id": "3", "role": "user", "content": [{"type": "text", "text": "new"}]},
            ]
        ),
        max_chars=100,
    )
    assert plan == UserTurn([{"type": "text", "text": "new"}], "enqueue")


def test_the_strategy_comes_from_forwarded_props() -> None:
    plan = plan_run(
        _input(
            messages=[{"id": "1", "role": "user", "content": "x"}],
            forwardedProps={"strategy": "interrupt"},
        ),
        max_chars=100,
    )
    assert isinstance(plan, UserTurn) and plan.strategy == "interrupt"


def test_resume_entries_are_approval_decisions() -> None:
    plan = plan_run(
        _input(
            resume=[
                {"interruptId": "a1", "status": "resolved", "payload": True},
                {
                    "interruptId": "a2",
                    "status": "resolved",
                    "payload": {"approved": False, "reason": "no"},
                },
                {"interruptId": "a3", "status": "cancelled"},
            ]
        ),
        max_chars=100,
    )
    assert plan == Approvals(
        [("a1", True, None), ("a2", False, "no"), ("a3", False, "cancelled by the client")]
    )


@pytest.mark.parametrize(
    ("fields", "status", "words"),
    [
        ({"messages": []}, 400, "needs the user message"),
        ({"messages": [{"id": "1", "role": "assistant", "content": "x"}]}, 400, "'assistant'"),
        ({"messages": [{"id": "1", "role": "user", "content": "x" * 101}]}, 413, "limit is 100"),
        ({"messages": [{"id": "1", "role": "user", "content": "  "}]}, 400, "no text"),
        (
            {
                "messages": [{"id": "1", "role": "user", "content": "x"}],
                "forwardedProps": {"strategy": "yolo"},
            },
            400,
            "'yolo'",
        ),
        (
            {"resume": [{"interruptId": "a", "status": "resolved", "payload": "yes"}]},
            400,
            "payload",
        ),
        ({"protocolVersion": "2.0", "messages": []}, 400, "AG-UI 1.x"),
    ],
)
def test_refusals(fields: dict[str, Any], status: int, words: str) -> None:
    with pytest.raises(BadRunInput) as caught:
        plan_run(_input(**fields), max_chars=100)
    assert caught.value.status == status
    assert words in caught.value.message


def test_tool_messages_after_the_last_assistant_message_are_tool_results() -> None:
    plan = plan_run(
        _input(
            messages=[
                {"id": "1", "role": "user", "content": "pick"},
                {"id": "2", "role": "assistant", "toolCalls": []},
                {"id": "3", "role": "tool", "toolCallId": "c1", "content": "blue"},
                {"id": "4", "role": "tool", "toolCallId": "c2", "content": "x", "error": "boom"},
            ]
        ),
        max_chars=100,
    )
    assert plan == ToolResults([("c1", "blue"), ("c2", "error: boom\nx")])


def test_client_tools_are_read_and_bounded() -> None:
    tool = {"name": "pick", "description": "d", "parameters": {"type": "object"}}
    assert client_tools(_input(tools=[tool])) == [ClientTool("pick", "d", {"type": "object"})]
    with pytest.raises(BadRunInput, match="same name"):
        client_tools(_input(tools=[tool, tool]))
    many = [{**tool, "name": f"t{i}"} for i in range(MAX_TOOLS + 1)]
    with pytest.raises(BadRunInput, match=f"at most {MAX_TOOLS}"):
        client_tools(_input(tools=many))
