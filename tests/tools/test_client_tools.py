"""``ClientToolBoard``: declared per conversation, approval-gated, answered by the client."""

from __future__ import annotations

import pytest

from drupe.errors import ToolError
from drupe.tools.base import ToolContext
from drupe.tools.client_tools import ClientTool, ClientToolBoard

PICK = ClientTool("pick", "Pick one.", {"type": "object"})


async def test_a_declared_tool_returns_the_result_the_client_provided_once() -> None:
    board = ClientToolBoard()
    board.declare("c1", [PICK])
    (entry,) = board.entries("c1")
    assert board.names("c1") == {"pick"} and board.entries("c2") == []
    assert entry.is_approval_gated({}) and entry.namespace == "client"
    context = ToolContext(conversation_id="c1", tool_call_id="call1")
    with pytest.raises(ToolError, match="sent no result"):
        await entry.execute({}, context)
    board.provide("c1", "call1", "blue")
    assert await entry.execute({}, context) == "blue"
    with pytest.raises(ToolError):  # a result is used once
        await entry.execute({}, context)


def test_declarations_replace_and_are_bounded() -> None:
    board = ClientToolBoard(max_conversations=2)
    board.declare("a", [PICK])
    board.declare("b", [PICK])
    board.declare("c", [PICK])
    assert board.names("a") == frozenset() and board.names("c") == {"pick"}
    board.declare("c", [])
    assert board.entries("c") == []
    with pytest.raises(ToolError, match="at most"):
        board.declare("d", [ClientTool(f"t{i}", "", {}) for i in range(65)])
