"""Shared helpers of the runtime benchmarks: arguments, the event loop, RSS, the JSON last line.

Owns: ``parse_args`` (every bench takes ``--quick`` and ``--loop``), ``run`` (anyio on the
asyncio backend, with uvloop by default as under ``uvicorn[standard]``), ``rss_kib``, ``median``,
``emit`` (the one JSON object that must be the last line of a bench's output), token-sized
delta text, and ``Subscriber``: a realistic in-process subscriber.

A ``Subscriber`` is what an SSE connection looks like to the stream manager: its listener's
``on_chunk`` only does a non-blocking ``send_nowait`` into the connection's own bounded anyio
memory object stream, and a consumer task of its own drains that stream in batches (one
``receive`` then ``receive_nowait`` until empty, as a coalescing writer does), touching each
event's cached JSON. A full stream is an overflow: the subscriber is counted as dropped and
turns dead, exactly like the SSE listener's overflow policy. The baseline benches feed the same
consumers through bare memory streams, so the consumer side costs the same in both.

Must never: print anything after ``emit``, or reach into the stream manager's internals (the
benches drive it only through ``send`` / ``attach`` / ``wait_settled``).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from drupe.streaming.listeners.base import BaseListener, StreamEvent, TerminalResult

__all__ = [
    "Subscriber",
    "consume",
    "emit",
    "median",
    "parse_args",
    "rss_kib",
    "run",
    "token_deltas",
]

SUBSCRIBER_BUFFER = 1024
"""Items a subscriber's memory stream holds before it overflows (the SSE byte cap's stand-in)."""

_WORDS = (
    "the",
    " model",
    " keeps",
    " talk",
    "ing",
    " about",
    " stre",
    "ams",
    ", and",
    " each",
    " tok",
    "en is",
    " short",
    ". ",
    "Then",
    " it",
    " end",
    "s.",
)


def parse_args(
    description: str, add_arguments: Callable[[argparse.ArgumentParser], None] | None = None
) -> argparse.Namespace:
    """Parse the common flags (``--quick``, ``--loop``) plus the bench's own."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (all benches < 60 s)")
    parser.add_argument(
        "--loop",
        choices=("uvloop", "asyncio"),
        default="uvloop",
        help="event loop (default uvloop, what uvicorn[standard] runs)",
    )
    if add_arguments is not None:
        add_arguments(parser)
    return parser.parse_args()


def run(main: Callable[[], Awaitable[dict[str, Any]]], args: argparse.Namespace) -> None:
    """Run ``main`` on anyio's asyncio backend and emit its summary as the last line."""
    summary = anyio.run(
        main, backend="asyncio", backend_options={"use_uvloop": args.loop == "uvloop"}
    )
    summary["loop"] = args.loop
    summary["quick"] = bool(args.quick)
    emit(summary)


def emit(summary: dict[str, Any]) -> None:
    """Print the bench's figures as ONE JSON object: the last line of its output."""
    print(json.dumps(summary, sort_keys=False), flush=True)


def rss_kib() -> int:
    """The process's resident set size in KiB (``VmRSS``), after a full garbage collection."""
    gc.collect()
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS line in /proc/self/status")


def median(values: Iterable[float]) -> float:
    return float(statistics.median(values))


def token_deltas(count: int, *, offset: int = 0) -> list[str]:
    """``count`` deterministic token-sized deltas (2-6 characters each)."""
    return [_WORDS[(offset + i) % len(_WORDS)] for i in range(count)]


class Subscriber(BaseListener):
    """A listener feeding a bounded memory stream that its own consumer task drains."""

    def __init__(self, listener_id: str, *, buffer: int = SUBSCRIBER_BUFFER) -> None:
        super().__init__(listener_id)
        send, receive = anyio.create_memory_object_stream[StreamEvent](buffer)
        self.send: MemoryObjectSendStream[StreamEvent] = send
        self.receive: MemoryObjectReceiveStream[StreamEvent] = receive
        self.overflowed = False
        self.events = 0
        self.bytes = 0

    def on_chunk(self, event: StreamEvent) -> None:
        try:
            self.send.send_nowait(event)
        except anyio.WouldBlock:
            self.overflowed = True
            self.send.close()

    def is_alive(self) -> bool:
        return not self.overflowed

    async def on_done(self, result: TerminalResult) -> None:
        self.send.close()

    async def on_paused(self, result: TerminalResult) -> None:
        self.send.close()

    async def on_error(self, result: TerminalResult) -> None:
        self.send.close()


async def consume(subscriber: Subscriber) -> None:
    """Drain ``subscriber`` in batches until its stream is closed (the SSE writer's loop)."""
    receive = subscriber.receive
    receive_nowait = receive.receive_nowait
    events = 0
    nbytes = 0
    with receive:
        while True:
            try:
                event = await receive.receive()
            except anyio.EndOfStream:
                break
            events += 1
            nbytes += len(event.json)
            while True:
                try:
                    event = receive_nowait()
                except (anyio.WouldBlock, anyio.EndOfStream):
                    break
                events += 1
                nbytes += len(event.json)
    subscriber.events += events
    subscriber.bytes += nbytes
