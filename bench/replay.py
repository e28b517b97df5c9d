"""Benchmark P5: a late subscriber attaches to a live stream of 10,000 deltas.

The stream (one execution on a real ``StreamManager``) holds a reasoning part, a tool call
(input deltas, input available, output available) in a first step, then a long text part in a
second step: ``--deltas`` deltas in all, every one token-sized (2-6 characters). The source
then waits, so the stream is still live when subscribers attach.

Measured, each as the median of ``--repeat`` attaches (each a fresh subscriber, detached
afterwards):

* ``replay_ms``: the time of ``manager.attach(...)`` for a subscriber with no cursor: building
  the compact replay from the ring and delivering it (``on_chunk`` per replayed event);
* ``replay_encode_ms``: the same plus encoding every replayed event to JSON (what an SSE
  listener then does);
* ``bytes_ratio``: the replayed events' JSON bytes over the message's text bytes (the UTF-8
  bytes of the text, reasoning and tool input/output the message holds); goal P5 <= 1.2;
* the same three for a resume with a cursor (``after``) in the middle of the text part
  (``resume_*``); the text bytes are then those the subscriber has not seen yet.

    python bench/replay.py --quick   # 10,000 deltas, 5 attaches of each kind
    python bench/replay.py           # 10,000 deltas, 25 attaches of each kind
"""

from __future__ import annotations

import argparse
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import orjson

from _common import median, parse_args, run, token_deltas
from drupe.chunks.types import Chunk, UIMessage
from drupe.streaming.listeners.base import BaseListener, StreamEvent
from drupe.streaming.manager import Attached, ExecutionSpec, SendInput, StreamManager

GOAL_MS = 50.0
GOAL_RATIO = 1.2
REASONING_SHARE = 20
"""One delta in REASONING_SHARE is reasoning."""
TOOL_DELTAS = 40


class _Collector(BaseListener):
    """A subscriber that keeps what it is given (the replay)."""

    def __init__(self, listener_id: str) -> None:
        super().__init__(listener_id)
        self.events: list[StreamEvent] = []

    def on_chunk(self, event: StreamEvent) -> None:
        self.events.append(event)


def _chunks(deltas: int, *, metadata: bool = False) -> tuple[list[Chunk], int]:
    """The stream's chunks, and the index of the text delta where the resume cursor sits.

    With ``metadata`` every text delta carries ``providerMetadata``, which the ring never
    merges: the worst case, one ring entry per delta.
    """
    reasoning = max(1, deltas // REASONING_SHARE)
    tool_args = orjson.dumps({"query": "stream " * (TOOL_DELTAS // 2), "limit": 10}).decode()
    step = max(1, len(tool_args) // TOOL_DELTAS + 1)
    tool_pieces = [tool_args[i : i + step] for i in range(0, len(tool_args), step)]
    text = deltas - reasoning - len(tool_pieces)
    chunks: list[Chunk] = [
        {"type": "start", "messageId": "msg_replay"},
        {"type": "start-step"},
        {"type": "reasoning-start", "id": "r1"},
        *({"type": "reasoning-delta", "id": "r1", "delta": d} for d in token_deltas(reasoning)),
        {"type": "reasoning-end", "id": "r1"},
        {"type": "tool-input-start", "toolCallId": "call_1", "toolName": "search"},
        *(
            {"type": "tool-input-delta", "toolCallId": "call_1", "inputTextDelta": piece}
            for piece in tool_pieces
        ),
        {
            "type": "tool-input-available",
            "toolCallId": "call_1",
            "toolName": "search",
            "input": orjson.loads(tool_args),
        },
        {
            "type": "tool-output-available",
            "toolCallId": "call_1",
            "output": {"results": ["one result", "another result"]},
        },
        {"type": "finish-step"},
        {"type": "start-step"},
        {"type": "text-start", "id": "t1"},
    ]
    first_text = len(chunks)
    chunks.extend(
        {"type": "text-delta", "id": "t1", "delta": d} for d in token_deltas(text, offset=7)
    )
    if metadata:
        for n, chunk in enumerate(chunks[first_text:]):
            chunk["providerMetadata"] = {"bench": {"n": n}}
    return chunks, first_text + text // 2


def _text_bytes(message: UIMessage) -> int:
    """UTF-8 bytes of the content the message carries (text, reasoning, tool input/output)."""
    total = 0
    for part in message["parts"]:
        if part["type"] in ("text", "reasoning"):
            total += len(part["text"].encode())
        elif part["type"].startswith("tool-"):
            total += len(orjson.dumps(part.get("input")))
            if "output" in part:
                total += len(orjson.dumps(part["output"]))
    return total


def _source(
    chunks: list[Chunk], published: anyio.Event, release: anyio.Event
) -> AsyncIterator[Chunk]:
    async def generate() -> AsyncIterator[Chunk]:
        for chunk in chunks:
            yield chunk
        published.set()  # resumed after the last yield: every chunk went through ``publish``
        await release.wait()
        yield {"type": "text-end", "id": "t1"}
        yield {"type": "finish-step"}
        yield {"type": "finish", "finishReason": "stop"}

    return generate()


def _attach(
    manager: StreamManager, conversation_id: str, name: str, after: int | None
) -> tuple[float, float, int, int]:
    """(attach ms, attach + encode ms, replayed JSON bytes, events) of one fresh subscriber."""
    collector = _Collector(name)
    start = time.perf_counter()
    attached = manager.attach(conversation_id, collector, after=after)
    attach_seconds = time.perf_counter() - start
    nbytes = sum(len(event.json) for event in collector.events)
    encode_seconds = time.perf_counter() - start
    assert isinstance(attached, Attached) and attached.replayed == len(collector.events)
    manager.detach(conversation_id, name)
    return attach_seconds * 1000, encode_seconds * 1000, nbytes, len(collector.events)


async def _worst_case(manager: StreamManager, deltas: int, repeat: int) -> dict[str, Any]:
    """A late attach when every delta carries ``providerMetadata`` (no merge in the ring)."""
    chunks, _ = _chunks(deltas, metadata=True)
    release = anyio.Event()
    published = anyio.Event()
    conversation_id = "replay-unmerged"
    manager.send(
        SendInput(
            conversation_id=conversation_id,
            executions=[
                ExecutionSpec(model_id="bench", source=lambda: _source(chunks, published, release))
            ],
        )
    )
    await published.wait()
    stream = manager.get(conversation_id)
    assert stream is not None
    execution = next(iter(stream.executions.values()))
    entries = len(execution.ring)
    text_bytes = _text_bytes(execution.snapshot())
    runs = [_attach(manager, conversation_id, f"unmerged-{n}", None) for n in range(repeat)]
    release.set()
    await manager.wait_settled(conversation_id)
    return {
        "entries": entries,
        "replay_ms": median(r[0] for r in runs),
        "encode_ms": median(r[1] for r in runs),
        "events": runs[0][3],
        "bytes_ratio": runs[0][2] / text_bytes,
    }


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--deltas", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=None, help="attaches of each kind (25; 5)")


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    repeat = args.repeat or (5 if args.quick else 25)
    chunks, cursor_index = _chunks(args.deltas)
    release = anyio.Event()
    published = anyio.Event()
    conversation_id = "replay"
    print(f"replay: a live stream of {len(chunks)} chunks ({args.deltas} deltas), {repeat} runs")
    async with StreamManager() as manager:
        manager.send(
            SendInput(
                conversation_id=conversation_id,
                executions=[
                    ExecutionSpec(
                        model_id="bench", source=lambda: _source(chunks, published, release)
                    )
                ],
            )
        )
        stream = manager.get(conversation_id)
        assert stream is not None
        execution = next(iter(stream.executions.values()))
        await published.wait()
        assert execution.chunk_count == len(chunks)
        message = execution.snapshot()
        text_bytes = _text_bytes(message)
        # The cursor is the seq the stream gave the middle text delta (seqs start at 1).
        cursor = cursor_index + 1
        unseen_text = len("".join(c["delta"] for c in chunks[cursor_index + 1 :]).encode())
        full: list[tuple[float, float, int, int]] = []
        resume: list[tuple[float, float, int, int]] = []
        for n in range(repeat):
            full.append(_attach(manager, conversation_id, f"late-{n}", None))
            resume.append(_attach(manager, conversation_id, f"resume-{n}", cursor))
        release.set()
        await manager.wait_settled(conversation_id)
        worst = await _worst_case(manager, args.deltas, repeat)
    replay_ms = median(r[0] for r in full)
    encode_ms = median(r[1] for r in full)
    replay_bytes = full[0][2]
    resume_ms = median(r[0] for r in resume)
    resume_encode_ms = median(r[1] for r in resume)
    resume_bytes = resume[0][2]
    ratio = replay_bytes / text_bytes
    resume_ratio = resume_bytes / unseen_text
    print(
        f"full replay: {full[0][3]} events, {replay_bytes:,} bytes for {text_bytes:,} text bytes"
        f" ({ratio:.3f}); attach {replay_ms:.2f} ms, with JSON encoding {encode_ms:.2f} ms"
    )
    print(
        f"resume after seq {cursor}: {resume[0][3]} events, {resume_bytes:,} bytes for"
        f" {unseen_text:,} unseen text bytes ({resume_ratio:.3f}); attach {resume_ms:.2f} ms,"
        f" with JSON encoding {resume_encode_ms:.2f} ms"
    )
    print(
        f"worst case (no delta merges in the ring, {worst['entries']} entries):"
        f" {worst['events']} events, bytes ratio {worst['bytes_ratio']:.3f},"
        f" attach {worst['replay_ms']:.2f} ms, with JSON encoding {worst['encode_ms']:.2f} ms"
    )
    return {
        "bench": "replay",
        "deltas": args.deltas,
        "chunks": len(chunks),
        "runs": repeat,
        "replay_ms": round(replay_ms, 3),
        "replay_encode_ms": round(encode_ms, 3),
        "replay_events": full[0][3],
        "replay_bytes": replay_bytes,
        "text_bytes": text_bytes,
        "bytes_ratio": round(ratio, 4),
        "resume_cursor": cursor,
        "resume_ms": round(resume_ms, 3),
        "resume_encode_ms": round(resume_encode_ms, 3),
        "resume_events": resume[0][3],
        "resume_bytes": resume_bytes,
        "resume_text_bytes": unseen_text,
        "resume_bytes_ratio": round(resume_ratio, 4),
        "goal_ms": GOAL_MS,
        "goal_bytes_ratio": GOAL_RATIO,
        "unmerged_ring_entries": worst["entries"],
        "unmerged_replay_ms": round(worst["replay_ms"], 3),
        "unmerged_replay_encode_ms": round(worst["encode_ms"], 3),
        "unmerged_replay_events": worst["events"],
        "unmerged_bytes_ratio": round(worst["bytes_ratio"], 4),
        "meets_goal": max(replay_ms, resume_ms) <= GOAL_MS
        and max(ratio, resume_ratio) <= GOAL_RATIO,
    }


if __name__ == "__main__":
    arguments = parse_args(__doc__.splitlines()[0], _arguments)
    run(lambda: _main(arguments), arguments)
