"""Benchmark P1: fan-out of one conversation to 1,000 in-process subscribers.

One stream of ``--deltas`` token-sized text deltas (plus the envelope chunks: start, step,
text-start/end, finish) goes through the real ``StreamManager`` to ``--subscribers``
``Subscriber`` listeners (``bench/_common.py``: ``on_chunk`` does a ``send_nowait`` into the
subscriber's own bounded memory stream, a consumer task per subscriber drains it in batches).
The chunk source hands the producer's task back to the loop every ``--burst`` chunks, as a model
socket read that returns several chunks does.

Baseline, in the same process and with the same consumers: a bare producer loop that wraps the
same chunks in events and does ``send_nowait`` to every subscriber's memory stream, with the
same bursts. Runs alternate (baseline, manager, baseline, ...) and each figure is a median.

    python bench/fanout.py --quick    # 1,000 deltas, 3 repetitions each
    python bench/fanout.py            # 5,000 deltas, 7 repetitions each

Figures: ``events_per_s`` = events delivered to subscribers / wall time, from ``send`` to the
last consumer having drained its stream; ``baseline_events_per_s``; ``ratio`` (goal P1 >= 0.5).
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel

from _common import Subscriber, consume, median, parse_args, run, token_deltas
from drupe.streaming.listeners.base import StreamEvent
from drupe.streaming.manager import Attached, ExecutionSpec, SendInput, StreamManager

GOAL_RATIO = 0.5


def _chunks(deltas: int) -> list[dict[str, Any]]:
    return [
        {"type": "start", "messageId": "msg_bench"},
        {"type": "start-step"},
        {"type": "text-start", "id": "t1"},
        *({"type": "text-delta", "id": "t1", "delta": d} for d in token_deltas(deltas)),
        {"type": "text-end", "id": "t1"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop"},
    ]


def _source(chunks: list[dict[str, Any]], burst: int) -> AsyncIterator[dict[str, Any]]:
    async def generate() -> AsyncIterator[dict[str, Any]]:
        for index, chunk in enumerate(chunks, 1):
            yield chunk
            if index % burst == 0:
                await anyio.lowlevel.checkpoint()

    return generate()


async def _manager_run(
    manager: StreamManager, chunks: list[dict[str, Any]], subscribers: int, burst: int, run_id: int
) -> tuple[tuple[float, float], list[Subscriber], int]:
    subs = [Subscriber(f"sub-{run_id}-{i}") for i in range(subscribers)]
    conversation_id = f"fanout-{run_id}"
    async with anyio.create_task_group() as tg:
        for sub in subs:
            tg.start_soon(consume, sub)
        await anyio.lowlevel.checkpoint()  # every consumer is parked in receive()
        start = _now()
        manager.send(
            SendInput(
                conversation_id=conversation_id,
                executions=[ExecutionSpec(model_id="bench", source=lambda: _source(chunks, burst))],
            )
        )
        replayed = 0
        for sub in subs:  # no await in between: every subscriber sees the whole stream
            attached = manager.attach(conversation_id, sub)
            assert isinstance(attached, Attached)
            replayed = attached.replayed
        await manager.wait_settled(conversation_id)
    return _elapsed(start), subs, replayed


async def _baseline_run(
    chunks: list[dict[str, Any]], subscribers: int, burst: int, run_id: int
) -> tuple[tuple[float, float], list[Subscriber]]:
    subs = [Subscriber(f"base-{run_id}-{i}") for i in range(subscribers)]
    sends = [sub.send for sub in subs]
    async with anyio.create_task_group() as tg:
        for sub in subs:
            tg.start_soon(consume, sub)
        await anyio.lowlevel.checkpoint()
        start = _now()
        for seq, chunk in enumerate(chunks, 1):
            event = StreamEvent(
                conversation_id="baseline",
                turn_id="turn",
                execution_id="bench",
                attempt_id=1,
                anchor_message_id=None,
                seq=seq,
                chunk=chunk,
            )
            for send in sends:
                send.send_nowait(event)
            if seq % burst == 0:
                await anyio.lowlevel.checkpoint()
        for send in sends:
            send.close()
    return _elapsed(start), subs


def _now() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _elapsed(start: tuple[float, float]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) since ``start``."""
    return time.perf_counter() - start[0], time.process_time() - start[1]


def _delivered(subs: list[Subscriber], expected: int) -> int:
    total = sum(sub.events for sub in subs)
    short = [sub.listener_id for sub in subs if sub.events != expected or sub.overflowed]
    if short:
        raise SystemExit(
            f"{len(short)} subscribers missed events (first: {short[0]},"
            f" {subs[0].events}/{expected} events, overflowed {subs[0].overflowed})"
        )
    return total


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--subscribers", type=int, default=1_000)
    parser.add_argument("--deltas", type=int, default=None, help="default 5,000 (quick: 1,000)")
    parser.add_argument("--burst", type=int, default=16, help="chunks per source read")
    parser.add_argument("--repeat", type=int, default=None, help="runs per variant (7; quick 3)")


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    deltas = args.deltas or (1_000 if args.quick else 5_000)
    repeat = args.repeat or (3 if args.quick else 7)
    chunks = _chunks(deltas)
    expected = len(chunks)
    print(
        f"fan-out: {args.subscribers} subscribers x {len(chunks)} chunks ({deltas} deltas),"
        f" burst {args.burst}, {repeat} runs per variant, loop {args.loop}"
    )
    ours: list[float] = []
    base: list[float] = []
    ours_cpu: list[float] = []
    base_cpu: list[float] = []
    async with StreamManager() as manager:
        for n in range(repeat):
            gc.collect()
            (seconds, cpu), subs = await _baseline_run(chunks, args.subscribers, args.burst, n)
            delivered = _delivered(subs, expected)
            base.append(delivered / seconds)
            base_cpu.append(delivered / cpu)
            gc.collect()
            (seconds, cpu), subs, replayed = await _manager_run(
                manager, chunks, args.subscribers, args.burst, n
            )
            # An attach before the first chunk replays a synthetic ``start`` (see README).
            delivered = _delivered(subs, expected + replayed)
            ours.append(delivered / seconds)
            ours_cpu.append(delivered / cpu)
            print(
                f"run {n + 1}/{repeat}: baseline {base[-1]:,.0f} events/s,"
                f" manager {ours[-1]:,.0f} events/s, ratio {ours[-1] / base[-1]:.2f}"
                f" (per CPU second: {base_cpu[-1]:,.0f} / {ours_cpu[-1]:,.0f},"
                f" ratio {ours_cpu[-1] / base_cpu[-1]:.2f})"
            )
    events_per_s = median(ours)
    baseline_events_per_s = median(base)
    ratio = events_per_s / baseline_events_per_s
    print(f"median: manager {events_per_s:,.0f} events/s, baseline {baseline_events_per_s:,.0f}")
    return {
        "bench": "fanout",
        "subscribers": args.subscribers,
        "deltas": deltas,
        "events_per_run": expected * args.subscribers,
        "burst": args.burst,
        "runs": repeat,
        "events_per_s": round(events_per_s),
        "baseline_events_per_s": round(baseline_events_per_s),
        "ratio": round(ratio, 3),
        "ratios": [round(a / b, 3) for a, b in zip(ours, base, strict=True)],
        "events_per_cpu_s": round(median(ours_cpu)),
        "baseline_events_per_cpu_s": round(median(base_cpu)),
        "cpu_ratio": round(median(ours_cpu) / median(base_cpu), 3),
        "goal_ratio": GOAL_RATIO,
        "meets_goal": ratio >= GOAL_RATIO,
    }


if __name__ == "__main__":
    arguments = parse_args(__doc__.splitlines()[0], _arguments)
    run(lambda: _main(arguments), arguments)
