"""Benchmark (issue 8, point 12): the status record map after many conversations stream once.

Streams ``--conversations`` conversations (100,000; quick: 20,000) once each through one real
``StreamManager`` (a four-chunk answer, grace period 0, ``--batch`` conversations at a time) and
reports how many status records the manager then holds (``status_records``) and what they weigh
(``status_bytes``: the map plus its keys and records, ``sys.getsizeof``), after every stream has
been evicted.

Baseline, in the same run: the same conversations through a manager whose cap exceeds the
number of conversations, which is what an unbounded map holds (the behaviour before the bound).
``ratio`` = bounded records / baseline records.

    python bench/status_records.py --quick
    python bench/status_records.py
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

from _common import parse_args, run
from drupe.streaming.config import StreamConfig
from drupe.streaming.manager import ExecutionSpec, SendInput, StreamManager
from drupe.streaming.status_book import DEFAULT_MAX_RECORDS
from drupe.testing.recording import RecordingListener


def _add(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conversations", type=int, default=None, help="default 100,000")
    parser.add_argument("--batch", type=int, default=500, help="conversations streaming at once")
    parser.add_argument("--cap", type=int, default=DEFAULT_MAX_RECORDS, help="max_status_records")


async def _answer(message_id: str) -> AsyncIterator[dict[str, Any]]:
    yield {"type": "start", "messageId": message_id}
    yield {"type": "text-start", "id": "t"}
    yield {"type": "text-delta", "id": "t", "delta": "ok"}
    yield {"type": "text-end", "id": "t"}


async def _stream_all(count: int, batch: int, cap: int) -> dict[str, Any]:
    config = StreamConfig(grace_period=0, max_status_records=cap)
    started = time.perf_counter()
    async with StreamManager(config) as manager:
        for first in range(0, count, batch):
            listeners = []
            for index in range(first, min(first + batch, count)):
                conversation_id = f"conv-{index}"
                listener = RecordingListener(f"rec:{index}")
                listeners.append(listener)
                manager.send(
                    SendInput(
                        conversation_id=conversation_id,
                        executions=[
                            ExecutionSpec(
                                model_id="m", source=lambda mid=conversation_id: _answer(mid)
                            )
                        ],
                        listeners=[listener],
                    )
                )
            for listener in listeners:
                await listener.wait_done()
        records = manager.status_book.records
        size = sys.getsizeof(records) + sum(
            sys.getsizeof(key) + sys.getsizeof(record) for key, record in records.items()
        )
        stats = manager.statistics()
        return {
            "records": len(records),
            "bytes": size,
            "streams": stats["streams"],
            "seconds": time.perf_counter() - started,
        }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    count = args.conversations or (20_000 if args.quick else 100_000)
    baseline = await _stream_all(count, args.batch, count + 1)
    bounded = await _stream_all(count, args.batch, args.cap)
    print(
        f"baseline (no bound): {baseline['records']:,} records, {baseline['bytes']:,} bytes "
        f"after {count:,} conversations ({baseline['seconds']:.1f} s)"
    )
    print(
        f"bounded (cap {args.cap:,}): {bounded['records']:,} records, {bounded['bytes']:,} bytes "
        f"({bounded['seconds']:.1f} s); streams left in the registry: {bounded['streams']}"
    )
    return {
        "bench": "status_records",
        "conversations": count,
        "cap": args.cap,
        "status_records": bounded["records"],
        "status_bytes": bounded["bytes"],
        "baseline_status_records": baseline["records"],
        "baseline_status_bytes": baseline["bytes"],
        "ratio": bounded["records"] / baseline["records"],
    }


if __name__ == "__main__":
    arguments = parse_args("status records after many conversations", _add)
    run(lambda: main_async(arguments), arguments)
