"""Issue 8 point 3: every event of a turn has a unique, strictly increasing cursor.

Turns are recorded on every path through the real stream manager (a chat turn that ends by
itself, one with its own ``finish``, a stopped one, a multi-model turn) and through the real
agent-session host with the fake driver, which frames nothing itself like the Claude Code CLI
(a session turn, the held stream of a steer roll and its continuation, a queued continuation
turn). Properties:

* every event a subscriber received carries a cursor, strictly increasing, and the last one of
  each execution is its end chunk (``finish``/``abort``/``error``);
* the SSE frames an ``SseListener`` writes for it carry unique, increasing ``id:`` lines;
* a reader that saw the events up to ANY cursor and resumes from it (``replay_events``)
  rebuilds exactly the same message, end chunk included.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drupe.chunks.accumulate import accumulate
from drupe.chunks.types import Chunk
from drupe.streaming.config import StreamConfig
from drupe.streaming.contracts import ExecutionSpec, SendInput
from drupe.streaming.listeners.base import StreamEvent
from drupe.streaming.listeners.sse import SseListener
from drupe.streaming.live import LiveStream
from drupe.streaming.manager import StreamManager
from drupe.testing.fake_driver import SteerableFakeConnection, text_turn
from tests.sessions.support import Env, Watcher

ENDS = ("finish", "abort", "error")


@dataclass
class Recorded:
    """One execution's events as a subscriber received them, and the stream that sent them."""

    path: str
    stream: LiveStream
    execution_id: str
    turn_id: str
    events: list[StreamEvent] = field(default_factory=list)


class Recorder(Watcher):
    """A subscriber that remembers the live stream each event came from."""

    def __init__(self, manager: StreamManager, path: str) -> None:
        super().__init__(f"rec:{path}")
        self.manager = manager
        self.path = path
        self.turns: dict[tuple[str, str], Recorded] = {}

    def on_chunk(self, event: StreamEvent) -> None:
        key = (event.turn_id, event.execution_id)
        if key not in self.turns:
            stream = self.manager.get(event.conversation_id)
            assert stream is not None and stream.turn_id == event.turn_id
            self.turns[key] = Recorded(self.path, stream, event.execution_id, event.turn_id)
        self.turns[key].events.append(event)
        super().on_chunk(event)


def _source(chunks: list[Chunk], gate: anyio.Event | None = None) -> Callable[[], Any]:
    async def run() -> AsyncIterator[Chunk]:
        for chunk in chunks:
            await anyio.lowlevel.checkpoint()
            yield chunk
        if gate is not None:
            await gate.wait()

    return run


def _body(words: list[str], part: str = "t1") -> list[Chunk]:
    return text_turn("m", words, part=part)[1:-1]


async def _chat_paths() -> list[Recorded]:
    out: list[Recorded] = []
    async with StreamManager(StreamConfig(grace_period=30.0)) as manager:

        async def run(path: str, specs: list[ExecutionSpec], stop: bool = False) -> None:
            recorder = Recorder(manager, path)
            manager.send(SendInput(conversation_id=path, executions=specs, listeners=[recorder]))
            if stop:
                await recorder.wait_chunk("text-delta")
                await manager.abort_and_drain(path)
            await recorder.wait_terminals(len(specs))
            await manager.wait_settled(path)
            out.extend(recorder.turns.values())

        start = [{"type": "start", "messageId": "m"}]
        ends = _source([*start, *_body(["x", "y"])])
        await run("chat-ends", [ExecutionSpec(model_id="a", source=ends)])
        finished = [*start, *_body(["hello", " world"]), {"type": "finish", "finishReason": "stop"}]
        await run("chat-finish", [ExecutionSpec(model_id="a", source=_source(finished))])
        await run(
            "chat-stopped",
            [ExecutionSpec(model_id="a", source=_source([*start, *_body(["par"])], anyio.Event()))],
            stop=True,
        )
        failing = [*start, *_body(["oops"]), {"type": "error", "errorText": "boom"}]
        await run("chat-error", [ExecutionSpec(model_id="a", source=_source(failing))])
        await run(
            "multi-model",
            [
                ExecutionSpec(model_id="a", source=_source([*start, *_body(["a1", "a2", "a3"])])),
                ExecutionSpec(model_id="b", source=_source([*start, *_body(["b1", "b2"], "p")])),
            ],
        )
    return out


async def _session_paths(env: Env) -> list[Recorded]:
    # A session turn, then a steer roll: A1a (held stream) and its continuation A2.
    sid = await env.new_session()
    cid = f"agent-session:{sid}"
    roll = Recorder(env.manager, "session-roll")
    first = await env.submit(sid, "one", [roll])
    conn = await env.driver.wait_connections(1)
    await conn.wait_sends(1)
    conn.emit_chunks(_body(["a1", "a1b"]))
    await conn.wait_consumed()
    await env.submit(sid, "steer")
    await conn.wait_redirects(1)
    conn.boundary()
    conn.emit_chunks([*_body(["a2"], "t2"), {"type": "message-metadata", "messageMetadata": {}}])
    conn.complete()
    await roll.wait_terminals(2)
    await env.manager.wait_settled(cid)
    await env.wait_for(lambda: not env.host.is_busy(sid))
    assert first.placeholder_ids

    # A queued follow-up: the runtime-driven continuation turn of a held stream.
    queued = Recorder(env.manager, "session-queued")
    await env.submit(sid, "two", [queued])
    await conn.wait_sends(2)
    assert isinstance(conn, SteerableFakeConnection)
    conn.redirect_result = False
    await env.submit(sid, "three")
    conn.emit_chunks([*_body(["b1"]), {"type": "message-metadata", "messageMetadata": {}}])
    conn.complete()
    await conn.wait_sends(3)
    conn.emit_chunks(_body(["c1", "c2"]))
    conn.complete()
    await queued.wait_terminals(2)
    await env.manager.wait_settled(cid)
    return [*roll.turns.values(), *queued.turns.values()]


def _check_cursors(rec: Recorded) -> None:
    seqs = [e.seq for e in rec.events]
    assert all(seqs), f"{rec.path}: an event without a cursor"
    assert seqs == sorted(set(seqs)), f"{rec.path}: cursors not unique and increasing: {seqs}"
    assert rec.events[-1].chunk["type"] in ENDS, f"{rec.path}: no end chunk with a cursor"
    assert rec.events[0].chunk["type"] == "start"


def _check_sse_ids(rec: Recorded) -> None:
    listener = SseListener("sse", turn_id=rec.turn_id, execution_id=rec.execution_id)
    for event in rec.events:
        listener.on_chunk(event)
    listener.finish(str(rec.stream.executions[rec.execution_id].terminal_status))
    frames = listener.buffer.take().split(b"\n\n")
    ids: list[int] = []
    for frame in frames:
        if not frame.startswith((b"id:", b"data:")) or frame == b"data: [DONE]":
            continue
        assert frame.startswith(b"id: "), f"{rec.path}: a frame without an id: {frame[:60]!r}"
        ids.append(int(frame.split(b"\n", 1)[0].rpartition(b"/")[2]))
    assert ids == sorted(set(ids)), f"{rec.path}: duplicate SSE ids {ids}"


def _rebuild(rec: Recorded, index: int) -> list[Chunk]:
    seen = [e.chunk for e in rec.events[: index + 1]]
    replay = rec.stream.replay_events(after=rec.events[index].seq, execution_ids=[rec.execution_id])
    return [*seen, *(e.chunk for e in replay)]


async def test_every_event_of_every_path_has_a_unique_increasing_cursor(env: Env) -> None:
    recorded = [*await _chat_paths(), *await _session_paths(env)]
    paths = {r.path for r in recorded}
    assert paths == {
        "chat-ends",
        "chat-finish",
        "chat-stopped",
        "chat-error",
        "multi-model",
        "session-roll",
        "session-queued",
    }
    assert sum(r.path == "multi-model" for r in recorded) == 2
    assert sum(r.path == "session-roll" for r in recorded) == 2  # A1a and A2
    assert sum(r.path == "session-queued" for r in recorded) == 2
    for rec in recorded:
        _check_cursors(rec)
        _check_sse_ids(rec)
    # The end chunk says how the execution ended.
    ends = {r.path: r.events[-1].chunk for r in recorded}
    assert ends["chat-stopped"] == {"type": "abort"}
    assert ends["chat-error"] == {"type": "error", "errorText": "boom"}
    assert ends["chat-finish"] == {"type": "finish", "finishReason": "stop"}

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def resume_anywhere(data: st.DataObject) -> None:
        rec = data.draw(st.sampled_from(recorded), label="turn")
        index = data.draw(st.integers(0, len(rec.events) - 1), label="cursor")
        full = [e.chunk for e in rec.events]
        rebuilt = _rebuild(rec, index)
        assert accumulate(rebuilt) == accumulate(full)
        assert rebuilt[-1] == full[-1], "the resumed reader lost the end chunk"

    resume_anywhere()
    # And exhaustively, since the recordings are small: every cursor of every turn.
    for rec in recorded:
        full = accumulate([e.chunk for e in rec.events])
        for index in range(len(rec.events)):
            rebuilt = _rebuild(rec, index)
            assert accumulate(rebuilt) == full, (rec.path, index)
            assert orjson.dumps(rebuilt[-1]) == orjson.dumps(rec.events[-1].chunk)
