"""Chat approvals (reference §8, scenarios 19, 22, 23): the pure rules, then end to end."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from drupe.admission.approval_service import ApprovalService
from drupe.admission.base import Submit
from drupe.agent.models.script import Text, ToolCall
from drupe.agent.models.scripted import register_script
from drupe.app import open_runtime
from drupe.chunks.accumulate import accumulate
from drupe.errors import ValidationError
from drupe.settings import Settings
from drupe.streaming.approval_rules import Decision, apply_decisions
from drupe.testing.recording import RecordingListener
from drupe.tools.base import ToolContext, ToolEntry
from tests.streaming.conftest import Runtime
from tests.streaming.sources import Source

HELLO = [{"type": "text", "text": "clean up please"}]


def _tool_part(approval_id: str, state: str = "approval-requested") -> dict[str, Any]:
    return {
        "type": "tool-rm",
        "toolCallId": f"call-{approval_id}",
        "state": state,
        "input": {},
        "approval": {"id": approval_id},
    }


def test_decisions_apply_atomically_and_idempotently() -> None:
    parts = [_tool_part("a1"), _tool_part("a2")]
    first = apply_decisions(parts, [Decision(approval_id="a1", approved=True)])
    assert first.changed and first.still_pending == {"a2"}
    assert parts[0]["state"] == "approval-requested"  # input untouched
    again = apply_decisions(first.parts, [Decision(approval_id="a1", approved=True)])
    assert not again.changed
    with pytest.raises(ValidationError, match="already approved"):
        apply_decisions(first.parts, [Decision(approval_id="a1", approved=False)])
    with pytest.raises(ValidationError, match="unknown approval"):
        apply_decisions(
            first.parts,
            [Decision(approval_id="a2", approved=True), Decision(approval_id="zz", approved=True)],
        )
    done = apply_decisions(first.parts, [Decision(approval_id="a2", approved=False, reason="no")])
    assert done.still_pending == frozenset()
    assert done.parts[1]["approval"] == {"id": "a2", "approved": False, "reason": "no"}


def _approval_chunks() -> list[dict[str, Any]]:
    return [
        {"type": "start", "messageId": "m"},
        {"type": "start-step"},
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": "rm"},
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "rm", "input": {}},
        {"type": "tool-approval-request", "approvalId": "ap1", "toolCallId": "c1"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "tool-calls"},
    ]


async def test_scenario_19_steer_queued_during_approval_waits_for_the_continuation(
    runtime: Runtime,
) -> None:
    cid = (await runtime.db.conversations.create()).id
    src = runtime.script("scripted:default", Source(_approval_chunks(), hold_at=4))
    first = await runtime.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO))
    await src.reached.wait()
    steer = await runtime.dispatcher.dispatch(
        Submit(conversation_id=cid, parts=[{"type": "text", "text": "and the logs"}])
    )
    assert steer.steer == "queue"
    src.released.set()
    await runtime.manager.wait_settled(cid)
    assert runtime.manager.status(cid).status == "awaiting-approval"  # type: ignore[union-attr]
    assert len(runtime.manager.steers.pending(cid)) == 1  # held, not answered yet
    row = await runtime.db.messages.get(first.placeholder_ids[0])
    assert row is not None and row.status == "success"
    assert row.parts[-1]["state"] == "approval-requested"

    continuation = runtime.script(
        "scripted:default",
        Source(
            [
                {"type": "start", "messageId": first.placeholder_ids[0]},
                {"type": "tool-output-available", "toolCallId": "c1", "output": "removed"},
                {"type": "start-step"},
                {"type": "text-start", "id": "t"},
                {"type": "text-delta", "id": "t", "delta": "done"},
                {"type": "text-end", "id": "t"},
                {"type": "finish-step"},
                {"type": "finish"},
            ],
            hold_at=1,
        ),
    )
    service = ApprovalService(runtime.dispatcher, runtime.db.messages)
    outcome = await service.respond(cid, [Decision(approval_id="ap1", approved=True)])
    assert outcome.ok and outcome.continued
    await continuation.reached.wait()
    reopened = await runtime.db.messages.get(first.placeholder_ids[0])
    assert reopened is not None and reopened.status == "pending"
    assert runtime.specs[-1].messages[-1]["parts"][-1]["state"] == "approval-responded"
    assert runtime.manager.steers.pending(cid)  # still waiting for the continuation
    late = RecordingListener("resumed-tab")  # a fresh client: no seed, like useChat's resume
    runtime.manager.attach(cid, late)
    continuation.released.set()
    tab = RecordingListener("wc")
    runtime.manager.attach(cid, tab)
    await tab.wait_done()  # carried into the steer continuation
    rows = await runtime.db.messages.list_for_conversation(cid)
    answer = next(r for r in rows if r.id == first.placeholder_ids[0])
    assert answer.status == "success"
    assert [p["state"] for p in answer.parts if p["type"] == "tool-rm"] == ["output-available"]
    turn = late.events[0].turn_id
    seen = accumulate([e.chunk for e in late.events if e.turn_id == turn])
    stored = [
        {**p, "approval": {"id": p["approval"]["id"]}} if "approval" in p else p
        for p in answer.parts
    ]
    assert seen["parts"] == stored  # v6 chunks carry only the approval's id
    steer_answer = rows[-1]
    assert steer_answer.parent_id == steer.user_message_id
    assert steer_answer.status == "success"
    assert runtime.manager.steers.pending(cid) == []


async def test_scenario_23_continuation_racing_a_live_submit_is_refused(runtime: Runtime) -> None:
    cid = (await runtime.db.conversations.create()).id
    runtime.script("scripted:default", Source(_approval_chunks()))
    await runtime.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO))
    await runtime.manager.wait_settled(cid)
    live = runtime.script("scripted:default", Source([{"type": "start"}], hold_at=0))
    await runtime.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO))
    service = ApprovalService(runtime.dispatcher, runtime.db.messages)
    outcome = await service.respond(cid, [Decision(approval_id="ap1", approved=True)])
    assert outcome.ok is False and outcome.continued is False and outcome.reason
    live.released.set()
    await runtime.manager.wait_settled(cid)


async def _rm(arguments: Mapping[str, Any], context: ToolContext) -> str:
    return f"removed {arguments.get('path')}"


async def test_scenario_22_approval_through_the_real_agent_loop(tmp_path: Path) -> None:
    register_script(
        "approve-rm",
        [[ToolCall("rm", {"path": "/tmp/x"}, tool_call_id="call-1")], [Text("All clean.")]],
    )
    async with open_runtime(Settings(data_dir=tmp_path)) as rt:
        rt.tools.register(
            ToolEntry(
                name="rm",
                description="Remove a file",
                input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
                execute=_rm,
                needs_approval=lambda args: True,
            )
        )
        cid = (await rt.db.conversations.create()).id
        rec = RecordingListener("wc")
        result = await rt.dispatcher.dispatch(
            Submit(conversation_id=cid, parts=HELLO, model_ids=["scripted:approve-rm"]), [rec]
        )
        terminal = await rec.wait_done()
        assert terminal.status == "success"
        assert rt.manager.status(cid).status == "awaiting-approval"  # type: ignore[union-attr]
        row = await rt.db.messages.get(result.placeholder_ids[0])
        assert row is not None and row.status == "success"
        tool = next(p for p in row.parts if p["type"] == "tool-rm")
        assert tool["state"] == "approval-requested"
        outcome = await rt.approvals.respond(
            cid, [Decision(approval_id=tool["approval"]["id"], approved=True)]
        )
        assert outcome.continued
        await rt.manager.wait_settled(cid)
        row = await rt.db.messages.get(result.placeholder_ids[0])
        assert row is not None and row.status == "success"
        tool = next(p for p in row.parts if p["type"] == "tool-rm")
        assert tool["state"] == "output-available" and tool["output"] == "removed /tmp/x"
        assert "All clean." in "".join(p.get("text", "") for p in row.parts)
        assert rt.manager.status(cid).status == "done"  # type: ignore[union-attr]
        # The same decision again (a double click, a stale button): nothing runs or is stored.
        again = await rt.approvals.respond(
            cid, [Decision(approval_id=tool["approval"]["id"], approved=True)]
        )
        assert again.ok and not again.continued and again.reason == "already decided"
        assert not rt.manager.is_live(cid)
        assert await rt.db.messages.get(result.placeholder_ids[0]) == row
