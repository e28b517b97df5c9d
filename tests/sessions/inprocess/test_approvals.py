"""Agent approvals in place: the turn waits for the decision; denial and headless deny."""

from __future__ import annotations

from pathlib import Path

from drupe.agent.models.script import Text, ToolCall
from drupe.sessions.drivers.base import (
    ChunkEvent,
    ConnectTarget,
    RuntimeEvent,
    ToolApprovalRequest,
    TurnComplete,
)
from tests.sessions.inprocess.support import (
    Reader,
    chunks,
    connect,
    driver_for,
    kinds,
    said,
    script_model,
    session,
)

_SHELL = {"shell": True, "shell_timeout_s": 10.0}


def _shell_script() -> str:
    return script_model(
        [
            [ToolCall("shell", {"command": "echo made > made.txt && echo ran"}, "call-sh")],
            [Text("Finished.")],
        ]
    )


async def _until_approval(reader: Reader) -> tuple[list[RuntimeEvent], ToolApprovalRequest]:
    seen: list[RuntimeEvent] = []
    while True:
        event = await reader.next()
        seen.append(event)
        if isinstance(event, ToolApprovalRequest):
            return seen, event


async def test_an_approved_shell_call_runs_in_the_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    async with driver_for(emit_approval_chunks=True) as driver:
        connection = await connect(driver, session(workspace, _shell_script(), settings=_SHELL))
        reader = Reader(connection)
        await connection.send(said("run it"))
        before, ask = await _until_approval(reader)
        # the UI saw the call and its approval request before the runtime asked
        assert [c["type"] for c in chunks(before)][-2:] == [
            "tool-input-available",
            "tool-approval-request",
        ]
        assert isinstance(before[-2], ChunkEvent)
        request_chunk = chunks(before)[-1]
        assert request_chunk["approvalId"] == ask.request.approval_id
        assert ask.request.tool_name == "shell" and ask.request.tool_call_id == "call-sh"
        assert dict(ask.request.input) == {"command": "echo made > made.txt && echo ran"}
        assert not (workspace / "made.txt").exists()  # it waits
        assert await connection.respond_approval(ask.request.approval_id, approved=True)
        assert not await connection.respond_approval(ask.request.approval_id, approved=True)
        rest = await reader.turn()
        await connection.close()

    assert (workspace / "made.txt").read_text() == "made\n"
    outputs = [c for c in chunks(rest) if c["type"] == "tool-output-available"]
    assert outputs[0]["output"]["exit_code"] == 0 and outputs[0]["output"]["stdout"] == "ran\n"
    assert isinstance(rest[-1], TurnComplete)


async def test_a_denied_call_emits_tool_output_denied_and_the_turn_goes_on(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    async with driver_for(emit_approval_chunks=True) as driver:
        connection = await connect(driver, session(workspace, _shell_script(), settings=_SHELL))
        reader = Reader(connection)
        await connection.send(said("run it"))
        _, ask = await _until_approval(reader)
        assert not await connection.respond_approval("approval_unknown", approved=True)
        await connection.respond_approval(ask.request.approval_id, approved=False, reason="no")
        rest = await reader.turn()
        await connection.close()

    assert not (workspace / "made.txt").exists()
    assert {"type": "tool-output-denied", "toolCallId": "call-sh"} in chunks(rest)
    assert "tool-output-available" not in kinds(rest)
    assert isinstance(rest[-1], TurnComplete)
    # the model was told: the denial is in the runtime's history for the next turn
    part = next(
        p for m in connection.history for p in m["parts"] if p.get("toolCallId") == "call-sh"
    )
    assert part["state"] == "output-denied"


async def test_by_default_the_host_emits_the_approval_chunks(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    async with driver_for() as driver:
        connection = await connect(driver, session(workspace, _shell_script(), settings=_SHELL))
        reader = Reader(connection)
        await connection.send(said("run it"))
        before, ask = await _until_approval(reader)
        await connection.respond_approval(ask.request.approval_id, approved=False)
        rest = await reader.turn()
        await connection.close()

    emitted = [c["type"] for c in chunks([*before, *rest])]
    assert "tool-approval-request" not in emitted and "tool-output-denied" not in emitted
    assert "tool-input-available" in emitted and isinstance(rest[-1], TurnComplete)
    part = next(
        p for m in connection.history for p in m["parts"] if p.get("toolCallId") == "call-sh"
    )
    assert part["state"] == "output-denied"


async def test_a_headless_turn_is_denied_at_once_without_an_approval_request(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    async with driver_for() as driver:
        connection = await connect(driver, session(workspace, _shell_script(), settings=_SHELL))
        reader = Reader(connection)
        await connection.send(said("run it", headless=True))
        events = await reader.turn()
        await connection.close()

    assert not any(isinstance(e, ToolApprovalRequest) for e in events)
    assert "tool-approval-request" not in kinds(events)
    assert {"type": "tool-output-denied", "toolCallId": "call-sh"} in chunks(events)
    assert not (workspace / "made.txt").exists()
    assert isinstance(events[-1], TurnComplete)


async def test_bypass_mode_runs_the_shell_without_asking(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    info = session(workspace, _shell_script(), settings=_SHELL, permission_mode="bypass")
    async with driver_for() as driver:
        connection = await connect(driver, info)
        reader = Reader(connection)
        await connection.send(said("run it"))
        events = await reader.turn()
        await connection.close()
    assert not any(isinstance(e, ToolApprovalRequest) for e in events)
    assert (workspace / "made.txt").read_text() == "made\n"


async def test_plan_mode_offers_only_reading_tools(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    model_id = script_model(
        [[ToolCall("write_file", {"path": "x.txt", "content": "x"})], [Text("ok")]]
    )
    async with driver_for() as driver:
        connection = await connect(driver, session(workspace, model_id, settings=_SHELL))
        reader = Reader(connection)
        target = ConnectTarget(model_id=model_id, permission_mode="plan")
        assert await connection.reconcile(target) == "patched"
        await connection.send(said("write"))
        events = await reader.turn()
        await connection.close()
    assert not (workspace / "x.txt").exists()
    assert "tool-output-available" not in kinds(events)


async def test_closing_while_an_approval_waits_ends_the_events(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    async with driver_for() as driver:
        connection = await connect(driver, session(workspace, _shell_script(), settings=_SHELL))
        reader = Reader(connection)
        await connection.send(said("run it"))
        await _until_approval(reader)
        await connection.close()
        rest = await reader.rest()
    assert not (workspace / "made.txt").exists()
    assert not any(isinstance(e, TurnComplete) for e in rest)
    assert all(not isinstance(e, ChunkEvent) or e.chunk["type"] != "text-delta" for e in rest)
