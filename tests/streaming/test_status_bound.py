"""Point 12 of issue 8: the status records stay bounded however many conversations streamed."""

from __future__ import annotations

import anyio

from drupe.http.state import StatusBoard
from drupe.streaming.config import StreamConfig
from drupe.streaming.contracts import StatusRecord
from drupe.streaming.manager import ExecutionSpec, SendInput, StreamManager
from drupe.testing.recording import RecordingListener
from tests.streaming.sources import Source, text_chunks

CAP = 8


async def _stream_once(manager: StreamManager, conversation_id: str) -> None:
    listener = RecordingListener(f"rec:{conversation_id}")
    manager.send(
        SendInput(
            conversation_id=conversation_id,
            executions=[
                ExecutionSpec(model_id="m", source=Source(text_chunks(conversation_id, ["x"])))
            ],
            listeners=[listener],
            grace_period=0,
        )
    )
    await listener.wait_done()


async def test_status_records_stay_below_the_cap_after_many_conversations_stream_once() -> None:
    config = StreamConfig(max_status_records=CAP, grace_period=0)
    async with StreamManager(config) as manager:
        for index in range(50):
            await _stream_once(manager, f"c{index}")
        assert manager.statistics()["status_records"] == CAP
        # The newest conversations keep their outcome; the oldest read as idle (no record).
        assert manager.status("c49") is not None
        assert manager.status("c49").status == "done"  # type: ignore[union-attr]
        assert [manager.status(f"c{index}") for index in range(50 - CAP)] == [None] * (50 - CAP)


async def test_a_live_conversation_keeps_its_status_record_past_the_cap() -> None:
    config = StreamConfig(max_status_records=CAP, grace_period=0)
    async with StreamManager(config) as manager:
        held = Source(text_chunks("live", ["a", "b"]), hold_at=2)
        listener = RecordingListener("rec:live")
        manager.send(
            SendInput(
                conversation_id="live",
                executions=[ExecutionSpec(model_id="m", source=held)],
                listeners=[listener],
            )
        )
        await held.reached.wait()
        for index in range(3 * CAP):
            await _stream_once(manager, f"c{index}")
        record = manager.status("live")
        assert record is not None and record.status == "streaming"
        assert len(manager.status_book) <= CAP
        held.released.set()
        with anyio.fail_after(5):
            await listener.wait_done()
        assert manager.status("live").status == "done"  # type: ignore[union-attr]


def test_status_board_drops_the_oldest_finished_conversations_and_keeps_live_ones() -> None:
    board = StatusBoard(max_entries=3)
    board.observe("live", StatusRecord(status="streaming", turn_id="t0"))
    for index in range(10):
        board.observe(f"c{index}", StatusRecord(status="done", turn_id=f"t{index}"))
    assert len(board.statuses) == 3
    assert board.status("live") == "streaming"
    assert board.status("c9") == "done"
    assert board.status("c0") == "idle"
