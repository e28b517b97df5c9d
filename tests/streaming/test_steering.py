"""Chat steering (reference §5, scenarios 15, 17, 18, 20, 21) and double-texting strategies."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from drupe.admission.base import Submit
from drupe.agent.models.script import Text, ToolCall
from drupe.agent.models.scripted import register_script
from drupe.app import open_runtime
from drupe.errors import AdmissionError
from drupe.settings import Settings
from drupe.testing.recording import RecordingListener
from drupe.tools.base import ToolContext, ToolEntry
from tests.streaming.conftest import Runtime
from tests.streaming.sources import Source, text_chunks

HELLO = [{"type": "text", "text": "hello"}]
STEER = [{"type": "text", "text": "actually, in French"}]


async def test_scenario_15_steer_yields_at_step_boundary_then_continuation(
    tmp_path: Path,
) -> None:
    gate = anyio.Event()
    entered = anyio.Event()

    async def slow_lookup(arguments: Mapping[str, Any], context: ToolContext) -> str:
        entered.set()
        await gate.wait()
        return "42"

    register_script(
        "steer-yield",
        [[ToolCall("lookup", {"q": "x"})], [Text("never reached: the turn yields")]],
    )
    register_script("steer-answer", [[Text("Bien sûr.")]])
    async with open_runtime(Settings(data_dir=tmp_path)) as rt:
        rt.tools.register(
            ToolEntry(
                name="lookup",
                description="Look something up",
                input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
                execute=slow_lookup,
            )
        )
        cid = (await rt.db.conversations.create()).id
        tab = RecordingListener("wc:1")
        first = await rt.dispatcher.dispatch(
            Submit(conversation_id=cid, parts=HELLO, model_ids=["scripted:steer-yield"]), [tab]
        )
        await entered.wait()
        steer = await rt.dispatcher.dispatch(
            Submit(conversation_id=cid, parts=STEER, model_ids=["scripted:steer-answer"])
        )
        assert steer.mode == "injected" and steer.steer == "queue"
        gate.set()
        done = await tab.wait_done()
        assert done.status == "success"
        rows = await rt.db.messages.list_for_conversation(cid)
        assert [(r.role, r.status) for r in rows] == [
            ("user", "success"),
            ("assistant", "success"),
            ("user", "success"),
            ("assistant", "success"),
        ]
        yielded = rows[1]
        assert yielded.id == first.placeholder_ids[0]
        assert "never reached" not in str(yielded.parts)
        assert any(p.get("state") == "output-available" for p in yielded.parts)
        answer = rows[3]
        assert answer.parent_id == steer.user_message_id
        assert answer.model_id == "scripted:steer-answer"
        assert "Bien sûr." in str(answer.parts)
        assert rows[2].parts == STEER  # the stored steer row is not wrapped
        assert rt.manager.steers.pending(cid) == []


@pytest.mark.parametrize("how", ["abort", "error"])
async def test_scenario_17_stop_or_error_drops_the_queue(runtime: Runtime, how: str) -> None:
    cid = (await runtime.db.conversations.create()).id
    fail_at = 4 if how == "error" else None
    src = runtime.script(
        "scripted:default", Source(text_chunks("m", ["a", "b"]), hold_at=3, fail_at=fail_at)
    )
    await runtime.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO))
    await src.reached.wait()
    steer = await runtime.dispatcher.dispatch(Submit(conversation_id=cid, parts=STEER))
    assert steer.steer == "queue"
    if how == "abort":
        await runtime.manager.abort_and_drain(cid)
    else:
        src.released.set()
        await runtime.manager.wait_settled(cid)
    assert runtime.manager.steers.pending(cid) == []
    rows = await runtime.db.messages.list_for_conversation(cid)
    assert [r.role for r in rows] == ["user", "assistant", "user"]  # steer stays unanswered
    assert rows[1].status == ("paused" if how == "abort" else "error")


async def test_scenario_18_steer_after_done_starts_now_after_abort_is_dropped(
    runtime: Runtime,
) -> None:
    cid = (await runtime.db.conversations.create()).id
    await runtime.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO))
    await runtime.manager.wait_settled(cid)
    from drupe.streaming.steering import PendingSteer

    row = (await runtime.db.messages.list_for_conversation(cid))[-1]
    assert (
        runtime.manager.steers.enqueue(cid, PendingSteer(user_message_id=row.parent_id or ""))
        == "queue-and-start"
    )
    # aborted conversation: dropped
    cid2 = (await runtime.db.conversations.create()).id
    src = runtime.script("scripted:default", Source(text_chunks("m", ["a"]), hold_at=2))
    await runtime.dispatcher.dispatch(Submit(conversation_id=cid2, parts=HELLO))
    await src.reached.wait()
    runtime.manager.abort(cid2)
    assert runtime.manager.steers.enqueue(cid2, PendingSteer(user_message_id="u")) == "drop"
    await runtime.manager.wait_settled(cid2)


async def test_scenario_20_continuation_launch_failure_errors_the_carried_tabs(
    runtime: Runtime,
) -> None:
    cid = (await runtime.db.conversations.create()).id
    src = runtime.script("scripted:default", Source(text_chunks("m", ["a"]), hold_at=2))
    await runtime.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO))
    await src.reached.wait()
    tab = RecordingListener("wc:tab")
    steer = await runtime.dispatcher.dispatch(Submit(conversation_id=cid, parts=STEER), [tab])
    await runtime.dispatcher.dispatch(Submit(conversation_id=cid, parts=STEER))
    await runtime.db.messages.delete([steer.user_message_id or ""])  # the launch will fail
    src.released.set()
    final = await tab.wait_done()
    assert final.status == "error" and final.is_conversation_done
    assert runtime.manager.status(cid).status == "error"  # type: ignore[union-attr]
    assert runtime.manager.steers.pending(cid) == []  # the rest of the queue is dropped


async def test_scenario_21_ephemeral_chat_rejects_live_submit(runtime: Runtime) -> None:
    cid = runtime.ephemeral.create()
    src = runtime.script("scripted:default", Source(text_chunks("m", ["a"]), hold_at=2))
    await runtime.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO))
    await src.reached.wait()
    with pytest.raises(AdmissionError):
        await runtime.dispatcher.dispatch(Submit(conversation_id=cid, parts=STEER))
    src.released.set()
    await runtime.manager.wait_settled(cid)


async def test_double_text_reject_refuses_and_stores_nothing(runtime: Runtime) -> None:
    cid = (await runtime.db.conversations.create()).id
    src = runtime.script("scripted:default", Source(text_chunks("m", ["a"]), hold_at=2))
    await runtime.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO))
    await src.reached.wait()
    with pytest.raises(AdmissionError) as info:
        await runtime.dispatcher.dispatch(
            Submit(conversation_id=cid, parts=STEER, strategy="reject")
        )
    assert info.value.reason == "busy"
    assert len(await runtime.db.messages.list_for_conversation(cid)) == 2
    src.released.set()
    await runtime.manager.wait_settled(cid)


async def test_double_text_interrupt_pauses_running_turn_and_answers(runtime: Runtime) -> None:
    cid = (await runtime.db.conversations.create()).id
    src = runtime.script("scripted:default", Source(text_chunks("m", ["a", "b"]), hang_at=4))
    first = await runtime.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO))
    await src.reached.wait()
    second = await runtime.dispatcher.dispatch(
        Submit(conversation_id=cid, parts=STEER, strategy="interrupt")
    )
    assert second.mode == "started"
    await runtime.manager.wait_settled(cid)
    rows = await runtime.db.messages.list_for_conversation(cid)
    by_id = {r.id: r for r in rows}
    assert by_id[first.placeholder_ids[0]].status == "paused"
    assert by_id[second.placeholder_ids[0]].status == "success"
    assert by_id[second.user_message_id or ""].parent_id == first.placeholder_ids[0]


async def test_double_text_rollback_deletes_the_answer_and_answers_both(
    runtime: Runtime,
) -> None:
    cid = (await runtime.db.conversations.create()).id
    src = runtime.script("scripted:default", Source(text_chunks("m", ["a", "b"]), hang_at=4))
    first = await runtime.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO))
    await src.reached.wait()
    second = await runtime.dispatcher.dispatch(
        Submit(conversation_id=cid, parts=STEER, strategy="rollback")
    )
    await runtime.manager.wait_settled(cid)
    rows = await runtime.db.messages.list_for_conversation(cid)
    assert first.placeholder_ids[0] not in {r.id for r in rows}
    assert [r.role for r in rows] == ["user", "user", "assistant"]
    assert rows[1].parent_id == first.user_message_id
    history = runtime.specs[-1].messages
    assert [m["role"] for m in history] == ["user", "user"]
    assert second.placeholder_ids[0] == rows[2].id


async def test_two_queued_steers_are_answered_in_order_on_one_line(runtime: Runtime) -> None:
    cid = (await runtime.db.conversations.create()).id
    src = runtime.script("scripted:default", Source(text_chunks("m", ["a"]), hold_at=2))
    await runtime.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO))
    await src.reached.wait()
    tab = RecordingListener("wc:tab")
    first = await runtime.dispatcher.dispatch(
        Submit(conversation_id=cid, parts=[{"type": "text", "text": "one"}]), [tab]
    )
    second = await runtime.dispatcher.dispatch(
        Submit(conversation_id=cid, parts=[{"type": "text", "text": "two"}])
    )
    src.released.set()
    with anyio.fail_after(10):
        await tab.wait_done()  # carried through both continuations
    assert [t.is_conversation_done for t in tab.terminals] == [False, False, True]
    await runtime.manager.wait_settled(cid)
    rows = await runtime.db.messages.list_for_conversation(cid)
    by_id = {r.id: r for r in rows}
    leaf = rows[-1]
    path = await runtime.db.messages.path_to(leaf.id)
    assert [r.role for r in path] == ["user", "assistant"] * 3
    assert path[2].id == first.user_message_id and path[4].id == second.user_message_id
    assert all(r.status == "success" for r in path)
    # the model answering the second steer saw the first steer's answer
    assert [m["role"] for m in runtime.specs[-1].messages] == ["user", "assistant"] * 2 + ["user"]
    assert by_id[second.user_message_id or ""].parent_id == path[3].id
