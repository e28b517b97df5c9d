"""Reference scenarios 1-14 (§12) against the real manager, dispatcher and SQLite database.

Models are replaced at the runner seam by ``Source`` objects so each scenario decides exactly
when chunks arrive; everything behind the seam (manager, listeners, persistence) is real.
"""

from __future__ import annotations

import anyio
import pytest

from drupe.admission.base import Submit
from drupe.streaming.config import StreamConfig
from drupe.streaming.listeners.base import TerminalResult
from drupe.streaming.listeners.persistence import PersistenceListener
from drupe.streaming.manager import (
    Attached,
    AttachFinished,
    AttachNotFound,
    ExecutionSpec,
    SendInput,
    StreamManager,
)
from drupe.testing.recording import RecordingBackend, RecordingListener
from tests.streaming.conftest import Runtime
from tests.streaming.sources import Source, text_chunks

HELLO = [{"type": "text", "text": "hello"}]


async def _conversation(rt: Runtime) -> str:
    record = await rt.db.conversations.create(title="t")
    return record.id


async def test_scenario_01_submit_writes_user_and_placeholder_in_one_transaction(
    rt: Runtime,
) -> None:
    cid = await _conversation(rt)
    src = rt.script("scripted:default", Source(text_chunks("x", ["hi"]), hold_at=0))
    result = await rt.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO))
    assert result.mode == "started"
    assert len(result.placeholder_ids) == 1
    rows = await rt.db.messages.list_for_conversation(cid)
    assert [(r.role, r.status) for r in rows] == [("user", "success"), ("assistant", "pending")]
    assert rows[1].id == result.placeholder_ids[0]
    assert rows[1].parent_id == rows[0].id == result.user_message_id
    assert rt.manager.status(cid).status == "pending"  # type: ignore[union-attr]
    assert rt.specs[-1].message_id == result.placeholder_ids[0]
    src.released.set()
    await rt.manager.wait_settled(cid)


async def test_scenario_02_status_becomes_streaming_once(rt: Runtime) -> None:
    cid = await _conversation(rt)
    seen: list[str] = []
    rt.manager.add_status_observer(lambda c, rec: seen.append(rec.status) if c == cid else None)
    rt.script("scripted:default", Source(text_chunks("x", ["a", "b", "c", "d"])))
    await rt.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO))
    await rt.manager.wait_settled(cid)
    assert seen == ["pending", "streaming", "done"]


@pytest.mark.parametrize("stream_config", [StreamConfig(grace_period=0.2)])
async def test_scenario_03_clean_end_success_done_then_evicted(rt: Runtime) -> None:
    cid = await _conversation(rt)
    rec = RecordingListener("wc:1")
    await rt.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO), [rec])
    await rec.wait_done()
    rows = await rt.db.messages.list_for_conversation(cid)
    assert rows[1].status == "success"
    assert rows[1].parts[-1] == {"type": "text", "text": "fine thanks", "state": "done"}
    status = rt.manager.status(cid)
    assert status is not None and status.status == "done" and status.last_completed_at
    assert isinstance(rt.manager.attach(cid, RecordingListener("late")), AttachFinished)
    stream = rt.manager.get(cid)
    assert stream is not None
    with anyio.fail_after(5):
        await stream.evicted.wait()
    assert isinstance(rt.manager.attach(cid, RecordingListener("late2")), AttachNotFound)
    assert rt.manager.status(cid).status == "done"  # type: ignore[union-attr]


async def test_scenario_04_stop_flips_synchronously_and_persists_paused(rt: Runtime) -> None:
    cid = await _conversation(rt)
    chunks = [
        {"type": "start", "messageId": "m"},
        {"type": "start-step"},
        {"type": "text-start", "id": "t"},
        {"type": "text-delta", "id": "t", "delta": "partial"},
        {"type": "text-end", "id": "t"},
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": "search"},
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "search", "input": {}},
        {"type": "tool-output-available", "toolCallId": "c1", "output": 1},
    ]
    src = rt.script("scripted:default", Source(chunks, hang_at=7))
    await rt.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO))
    await src.reached.wait()
    assert rt.manager.abort(cid) is True
    assert rt.manager.status(cid).status == "aborted"  # synchronous  # type: ignore[union-attr]
    assert rt.manager.get(cid).is_live is False  # type: ignore[union-attr]
    await rt.manager.abort_and_drain(cid)
    rows = await rt.db.messages.list_for_conversation(cid)
    answer = rows[1]
    assert answer.status == "paused"
    tool = next(p for p in answer.parts if p["type"] == "tool-search")
    assert tool["state"] == "output-error"
    assert tool["errorText"] == "Interrupted by user"
    assert any(p.get("text") == "partial" for p in answer.parts)


async def test_scenario_04_abort_and_drain_returns_after_persistence(rt: Runtime) -> None:
    cid = await _conversation(rt)
    src = rt.script("scripted:default", Source(text_chunks("m", ["a", "b"]), hang_at=4))
    await rt.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO))
    await src.reached.wait()
    assert await rt.manager.abort_and_drain(cid) is True
    rows = await rt.db.messages.list_for_conversation(cid)
    assert rows[1].status == "paused"
    assert src.closed.is_set()


@pytest.mark.parametrize("stream_config", [StreamConfig(idle_timeout=0.05)])
async def test_scenario_05_idle_watchdog_pauses_not_success(rt: Runtime) -> None:
    cid = await _conversation(rt)
    rec = RecordingListener("wc:1")
    rt.script("scripted:default", Source(text_chunks("m", ["a", "b"]), hang_at=4))
    await rt.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO), [rec])
    result = await rec.wait_done()
    assert result.status == "paused" and result.reason == "idle-timeout"
    rows = await rt.db.messages.list_for_conversation(cid)
    assert rows[1].status == "paused"


async def test_scenario_06_error_chunk_is_stream_error_with_one_data_error(rt: Runtime) -> None:
    cid = await _conversation(rt)
    chunks = [
        *text_chunks("m", ["a"])[:-1],
        {"type": "error", "errorText": "provider overloaded"},
        {"type": "error", "errorText": "second"},
    ]
    rt.script("scripted:default", Source(chunks))
    rec = RecordingListener("wc:1")
    await rt.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO), [rec])
    result = await rec.wait_done()
    assert result.status == "error"
    rows = await rt.db.messages.list_for_conversation(cid)
    errors = [p for p in rows[1].parts if p["type"] == "data-error"]
    assert rows[1].status == "error"
    assert len(errors) == 1
    assert errors[0]["data"]["name"] == "StreamError"
    assert errors[0]["data"]["message"] == "provider overloaded"


async def test_scenario_07_rejection_before_streaming_finalizes_placeholder_error(
    rt: Runtime,
) -> None:
    cid = await _conversation(rt)
    rt.script("scripted:default", Source([], fail_at=0, error=ConnectionError("refused")))
    rec = RecordingListener("wc:1")
    result = await rt.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO), [rec])
    terminal = await rec.wait_done()
    assert terminal.status == "error" and terminal.final_message is None
    row = await rt.db.messages.get(result.placeholder_ids[0])
    assert row is not None and row.status == "error"
    assert row.id == result.placeholder_ids[0]
    assert [p["type"] for p in row.parts] == ["data-error"]
    assert row.parts[0]["data"]["name"] == "ConnectionError"


async def test_scenario_08_late_attach_gets_compact_replay_then_live(rt: Runtime) -> None:
    cid = await _conversation(rt)
    words = [f"w{i} " for i in range(50)]
    src = rt.script("scripted:default", Source(text_chunks("m", words), hold_at=30))
    a = RecordingListener("wc:a")
    await rt.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO), [a])
    await src.reached.wait()
    b = RecordingListener("wc:b")
    attached = rt.manager.attach(cid, b)
    assert isinstance(attached, Attached)
    replay_types = [c["type"] for c in b.chunks()]
    # merged deltas: one delta entry for 27 raw deltas
    assert replay_types == ["start", "start-step", "text-start", "text-delta"]
    rt.manager.detach(cid, "wc:b")
    src.released.set()
    await a.wait_done()
    assert a.message()["parts"] == (await _final(rt, cid))["parts"]
    assert len(b.events) == 4  # detached: nothing more, and the stream still ended
    assert a.terminals[-1].status == "success"


async def test_scenario_08_attach_after_replays_then_both_receive(rt: Runtime) -> None:
    cid = await _conversation(rt)
    src = rt.script("scripted:default", Source(text_chunks("m", ["a", "b", "c", "d"]), hold_at=4))
    a = RecordingListener("wc:a")
    await rt.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO), [a])
    await src.reached.wait()
    b = RecordingListener("wc:b")
    rt.manager.attach(cid, b)
    src.released.set()
    await a.wait_done()
    await b.wait_done()
    assert a.message() == b.message()


async def _final(rt: Runtime, cid: str) -> dict[str, object]:
    rows = await rt.db.messages.list_for_conversation(cid)
    msg = rows[-1].as_ui_message()
    msg.pop("metadata", None)
    return msg


async def test_scenario_09_ring_keeps_last_three() -> None:
    async with StreamManager(StreamConfig(max_buffer_chunks=3)) as manager:
        chunks = [{"type": "data-item", "id": f"d{i}", "data": i} for i in range(5)]
        src = Source([*chunks, {"type": "finish"}], hold_at=5)
        manager.send(
            SendInput(conversation_id="c", executions=[ExecutionSpec(model_id="m", source=src)])
        )
        await src.reached.wait()
        stream = manager.get("c")
        assert stream is not None
        ring = stream.executions["m"].ring
        assert len(ring) == 3 and ring.dropped == 2
        late = RecordingListener("late")
        manager.attach("c", late)
        data = [c for c in late.chunks() if c["type"] == "data-item"]
        assert [c["data"] for c in data] == [2, 3, 4]
        src.released.set()
        await manager.wait_settled("c")


async def test_scenario_10_delta_flood_cannot_evict_part_start() -> None:
    async with StreamManager(StreamConfig(max_buffer_chunks=4)) as manager:
        chunks = text_chunks("m", ["x"] * 5000)
        src = Source(chunks, hold_at=len(chunks) - 3)
        manager.send(
            SendInput(conversation_id="c", executions=[ExecutionSpec(model_id="m", source=src)])
        )
        await src.reached.wait()
        stream = manager.get("c")
        assert stream is not None
        ring = stream.executions["m"].ring
        assert ring.dropped == 0 and len(ring) == 4  # start, start-step, text-start, one delta
        late = RecordingListener("late")
        manager.attach("c", late)
        assert late.message()["parts"][-1]["text"] == "x" * 5000
        src.released.set()
        await manager.wait_settled("c")


async def test_scenario_11_pending_approval_pins_the_ring() -> None:
    async with StreamManager(StreamConfig(max_buffer_chunks=3)) as manager:
        chunks = [
            {"type": "start", "messageId": "m"},
            {"type": "tool-input-start", "toolCallId": "c1", "toolName": "rm"},
            {"type": "tool-input-available", "toolCallId": "c1", "toolName": "rm", "input": {}},
            {"type": "tool-approval-request", "approvalId": "a1", "toolCallId": "c1"},
            *({"type": "data-note", "id": f"n{i}", "data": i} for i in range(10)),
            {"type": "tool-output-denied", "toolCallId": "c1"},
            {"type": "data-note", "id": "last", "data": 99},
        ]
        src = Source(chunks, hold_at=14)
        manager.send(
            SendInput(conversation_id="c", executions=[ExecutionSpec(model_id="m", source=src)])
        )
        await src.reached.wait()
        ring = manager.get("c").executions["m"].ring  # type: ignore[union-attr]
        assert ring.dropped == 0 and len(ring) == 14
        src.released.set()
        await manager.wait_settled("c")
        # 16 entries: the 15 chunks and the ``finish`` published at the terminal.
        assert len(ring) == 3 and ring.dropped == 13 + 1
        assert ring.chunks()[-1] == {"type": "finish"}


@pytest.mark.parametrize("stream_config", [StreamConfig(grace_period=0.3)])
async def test_scenario_12_attach_in_grace_returns_final_messages(rt: Runtime) -> None:
    cid = await _conversation(rt)
    rt.script("scripted:a", Source(text_chunks("ma", ["A"])))
    rt.script("scripted:b", Source(text_chunks("mb", ["B"])))
    rec = RecordingListener("wc")
    await rt.dispatcher.dispatch(
        Submit(conversation_id=cid, parts=HELLO, model_ids=["scripted:a", "scripted:b"]), [rec]
    )
    await rec.wait_done()
    late = RecordingListener("late")
    result = rt.manager.attach(cid, late)
    assert isinstance(result, AttachFinished) and result.status == "done"
    assert set(result.final_messages) == {"scripted:a", "scripted:b"}
    assert result.final_messages["scripted:b"]["parts"][-1]["text"] == "B"
    assert "late" not in rt.manager.get(cid).listeners  # type: ignore[union-attr]
    stream = rt.manager.get(cid)
    assert stream is not None
    with anyio.fail_after(5):
        await stream.evicted.wait()
    assert isinstance(rt.manager.attach(cid, late), AttachNotFound)


async def test_scenario_13_dead_listeners_continue_mode_completes(rt: Runtime) -> None:
    cid = await _conversation(rt)
    src = rt.script("scripted:default", Source(text_chunks("m", ["a", "b"]), hold_at=3))
    tab = RecordingListener("wc:tab")
    await rt.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO), [tab])
    await src.reached.wait()
    tab.alive = False
    src.released.set()
    await rt.manager.wait_settled(cid)
    rows = await rt.db.messages.list_for_conversation(cid)
    assert rows[1].status == "success"
    assert "wc:tab" not in rt.manager.get(cid).listeners  # type: ignore[union-attr]


@pytest.mark.parametrize("stream_config", [StreamConfig(background_mode="abort")])
async def test_scenario_13_abort_mode_aborts_without_subscribers(rt: Runtime) -> None:
    cid = await _conversation(rt)
    src = rt.script("scripted:default", Source(text_chunks("m", ["a", "b"]), hold_at=3))
    tab = RecordingListener("wc:tab")
    await rt.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO), [tab])
    await src.reached.wait()
    tab.alive = False
    src.released.set()
    await rt.manager.wait_settled(cid)
    rows = await rt.db.messages.list_for_conversation(cid)
    assert rows[1].status == "paused"
    stream = rt.manager.get(cid)
    assert (
        stream is not None
        and stream.executions["scripted:default"].abort_reason == "no-subscribers"
    )


async def test_scenario_14_multi_model_error_before_chunk_and_success(rt: Runtime) -> None:
    cid = await _conversation(rt)
    seen: list[str] = []
    rt.manager.add_status_observer(lambda c, rec: seen.append(rec.status) if c == cid else None)
    rt.script("scripted:a", Source([], fail_at=0, error=RuntimeError("A broke")))
    b = rt.script("scripted:b", Source(text_chunks("mb", ["B"]), hold_at=0))
    rec = RecordingListener("wc")
    result = await rt.dispatcher.dispatch(
        Submit(conversation_id=cid, parts=HELLO, model_ids=["scripted:a", "scripted:b"]), [rec]
    )
    await b.reached.wait()
    await rt.manager.get(cid).executions["scripted:a"].settled.wait()  # type: ignore[union-attr]
    assert rt.manager.status(cid).status == "pending"  # type: ignore[union-attr]
    b.released.set()
    final = await rec.wait_done()
    assert final.is_conversation_done
    assert seen == ["pending", "streaming", "error"]
    rows = {
        r.model_id: r
        for r in await rt.db.messages.list_for_conversation(cid)
        if r.role == "assistant"
    }
    assert rows["scripted:a"].status == "error" and rows["scripted:b"].status == "success"
    assert rows["scripted:a"].siblings_group_id == rows["scripted:b"].siblings_group_id is not None
    assert set(result.placeholder_ids) == {rows["scripted:a"].id, rows["scripted:b"].id}


@pytest.fixture
def rt(runtime: Runtime) -> Runtime:
    return runtime


async def test_persistence_listener_filters_by_model() -> None:
    backend = RecordingBackend()
    listener = PersistenceListener(backend, model_id="a", conversation_id="c")
    base = {
        "conversation_id": "c",
        "turn_id": "t",
        "execution_id": "b",
        "attempt_id": 1,
        "anchor_message_id": "p",
        "is_conversation_done": True,
    }
    await listener.on_done(
        TerminalResult(
            status="success",
            model_id="b",
            final_message={
                "id": "p",
                "role": "assistant",
                "parts": [{"type": "text", "text": "x"}],
            },
            **base,
        )
    )  # type: ignore[arg-type]
    assert backend.writes == []
