"""``SseListener`` / ``MultiplexListener`` / ``FrameBuffer`` on their own (no HTTP, no manager)."""

from __future__ import annotations

from typing import Any

import orjson

from drupe.chunks.accumulate import accumulate
from drupe.streaming.listeners.base import StreamEvent, TerminalResult
from drupe.streaming.listeners.sse import (
    PING_FRAME,
    FrameBuffer,
    MultiplexListener,
    SseListener,
    format_cursor,
    parse_cursor,
)
from tests.gateway.sse import parse_events


def event(
    seq: int, chunk: dict[str, Any], *, turn: str = "t1", execution: str = "m"
) -> StreamEvent:
    return StreamEvent(
        conversation_id="c",
        turn_id=turn,
        execution_id=execution,
        attempt_id=1,
        anchor_message_id="msg",
        seq=seq,
        chunk=chunk,
    )


def terminal(
    status: str, *, turn: str = "t1", execution: str = "m", done: bool = True, error: str = ""
) -> TerminalResult:
    return TerminalResult(
        status=status,  # type: ignore[arg-type]
        conversation_id="c",
        turn_id=turn,
        execution_id=execution,
        model_id=execution,
        attempt_id=1,
        anchor_message_id="msg",
        final_message=None,
        is_conversation_done=done,
        error={"name": "X", "message": error} if error else None,
    )


TEXT = [
    {"type": "start", "messageId": "msg"},
    {"type": "text-start", "id": "a"},
    {"type": "text-delta", "id": "a", "delta": "hello"},
    {"type": "text-end", "id": "a"},
]


async def drain(buffer: FrameBuffer) -> list[bytes]:
    return [batch async for batch in buffer.frames()]


def test_cursor_round_trip_and_garbage() -> None:
    assert parse_cursor(format_cursor("1795:3", 42)) == ("1795:3", 42)
    for bad in (None, "", "x", "t/", "/3", "t/-1", "t/1.5", "t/" + "9" * 30):
        assert parse_cursor(bad) is None


async def test_success_adds_finish_and_done_and_everything_queued_is_one_write() -> None:
    listener = SseListener("l", turn_id="t1", execution_id="m")
    for seq, chunk in enumerate(TEXT, 1):
        listener.on_chunk(event(seq, chunk))
    listener.on_chunk(event(9, {"type": "text-delta", "id": "z", "delta": "x"}, execution="other"))
    await listener.on_done(terminal("success", execution="other"))  # another model: ignored
    await listener.on_done(terminal("success"))
    batches = await drain(listener.buffer)
    assert len(batches) == 1
    events = parse_events(batches[0].decode())
    assert [e.id for e in events] == ["t1/1", "t1/2", "t1/3", "t1/4", None, None]
    assert events[-2].json == {"type": "finish"} and events[-1].data == "[DONE]"
    assert accumulate([e.json for e in events[:-1]])["parts"][0]["text"] == "hello"
    assert not listener.is_alive()


async def test_paused_adds_abort_and_error_adds_one_error_frame() -> None:
    paused = SseListener("p", turn_id="t1", execution_id="m")
    paused.on_chunk(event(1, TEXT[0]))
    await paused.on_paused(terminal("paused"))
    frames = parse_events(b"".join(await drain(paused.buffer)).decode())
    assert [e.data for e in frames][-2:] == ['{"type":"abort"}', "[DONE]"]

    failed = SseListener("e", turn_id="t1", execution_id="m")
    failed.on_chunk(event(1, TEXT[0]))
    await failed.on_error(terminal("error", error="boom"))
    frames = parse_events(b"".join(await drain(failed.buffer)).decode())
    assert frames[-2].json == {"type": "error", "errorText": "boom"}

    streamed = SseListener("s", turn_id="t1", execution_id="m")
    streamed.on_chunk(event(1, {"type": "error", "errorText": "model said no"}))
    await streamed.on_error(terminal("error", error="model said no"))
    frames = parse_events(b"".join(await drain(streamed.buffer)).decode())
    assert [e.data for e in frames].count('{"type":"error","errorText":"model said no"}') == 1


async def test_overflow_drops_the_listener_without_done_and_keeps_a_contiguous_prefix() -> None:
    listener = SseListener("slow", turn_id="t1", execution_id="m", max_bytes=300)
    for seq in range(1, 50):
        listener.on_chunk(event(seq, {"type": "text-delta", "id": "a", "delta": "xxxxxxxxxx"}))
    assert listener.buffer.overflowed and not listener.is_alive()
    events = parse_events(b"".join(await drain(listener.buffer)).decode())
    assert events and all(e.data != "[DONE]" for e in events)
    seqs = [parse_cursor(e.id)[1] for e in events if e.id]  # type: ignore[index]
    assert seqs == list(range(1, len(seqs) + 1))


async def test_next_turn_mode_follows_the_continuation_or_reports_a_dropped_steer() -> None:
    steer = SseListener("steer")
    steer.on_chunk(event(3, TEXT[2]))  # replay of the running turn, while still pending
    steer.follow_next_turn("t1")
    steer.on_chunk(event(4, TEXT[3]))
    await steer.on_done(terminal("success", done=False))  # the running turn chains
    for seq, chunk in enumerate(TEXT, 1):
        steer.on_chunk(event(seq, chunk, turn="t2", execution="echo"))
    await steer.on_done(terminal("success", turn="t2", execution="echo"))
    events = parse_events(b"".join(await drain(steer.buffer)).decode())
    assert [e.id for e in events[:4]] == ["t2/1", "t2/2", "t2/3", "t2/4"]

    dropped = SseListener("dropped")
    dropped.follow_next_turn("t1")
    await dropped.on_paused(terminal("paused"))
    events = parse_events(b"".join(await drain(dropped.buffer)).decode())
    assert "not answered" in events[0].json["errorText"] and events[-1].data == "[DONE]"


async def test_pending_mode_holds_events_until_a_target_is_chosen() -> None:
    listener = SseListener("pending")
    listener.on_chunk(event(1, TEXT[0], execution="b"))
    listener.on_chunk(event(2, TEXT[0], execution="a"))
    listener.follow("t1", "a")
    await listener.on_done(terminal("success", execution="a"))
    events = parse_events(b"".join(await drain(listener.buffer)).decode())
    assert [e.id for e in events] == ["t1/2", None, None]


async def test_ping_when_idle() -> None:
    buffer = FrameBuffer()
    assert await buffer.next_batch(ping_after=0) == PING_FRAME
    buffer.push(b"data: 1\n\n")
    assert await buffer.next_batch(ping_after=0) == b"data: 1\n\n"


def test_multiplex_frames_and_dedupe() -> None:
    listener = MultiplexListener("mux")
    listener.on_status("streaming", "t1")
    listener.on_chunk(event(1, TEXT[0], execution="a"))
    listener.on_chunk(event(1, TEXT[0], execution="a"))  # a second attach replaying it: dropped
    listener.on_chunk(event(2, TEXT[0], execution="b"))
    events = parse_events(listener.buffer.take().decode())
    assert events[0].id is None
    assert events[0].json == {"kind": "status", "status": "streaming", "turnId": "t1"}
    assert [e.id for e in events[1:]] == ["t1/1", "t1/2"]
    assert events[2].json == {
        "kind": "chunk",
        "executionId": "b",
        "attemptId": 1,
        "seq": 2,
        "modelId": "b",
        "turnId": "t1",
        "chunk": orjson.loads(orjson.dumps(TEXT[0])),
    }
    assert listener.seen("t1") == 2
