"""Redis memory per live stream: the entries and bytes one turn's chunk log holds in Redis.

An answer of 4-8 character text deltas (about a token each) is written to a turn's chunk log the
way an owner writes it: through the ``Coalescer`` (the default 25 ms window) and
``RedisChunkLog.append``, with synthetic read times at a given rate (deltas per second), so the
figures depend only on the rate, never on the machine's speed. Before the terminal entry (the
stream is still live) the bench reads ``XLEN`` and ``MEMORY USAGE <key> SAMPLES 0`` (every
entry counted) of the log and of its anchors hash (the execution's row, and the numbers of its
execution and part ids) from a private ``redis-server`` it starts on a free loopback port. The
chunks carry the owner's seqs and a model id as the execution id, as an owner writes them.

Answers: a typical one (600 deltas, ~3.6 KB of text) and a long one (2,400 deltas). The
baseline, in the same run: the same answer with one ``XADD`` per chunk (no coalescing).
``memory_per_text_byte`` is the turn's keys' bytes per byte of answer text.

    .venv/bin/python bench/cluster_memory.py --quick
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio
from bench._common import emit
from bench.cluster_log import EXECUTION, _answer, _free_port, _wait_for
from redis.asyncio import Redis

from drupe.chunks.types import Chunk
from drupe.cluster.chunk_log import RedisChunkLog
from drupe.cluster.coalesce import Coalescer
from drupe.cluster.log_writer import anchors_key


async def _live_stream(
    redis: Redis, chunks: list[Chunk], rate: float | None, key: str
) -> tuple[int, int]:
    """Write the answer but its terminal entry, with the owner's seqs and anchor row; return
    (entries, ``MEMORY USAGE`` of the log and its anchors hash)."""
    log = RedisChunkLog(redis, prefix="bench")
    await redis.hset(anchors_key(key), EXECUTION, "msg_" + "7" * 32)  # as the owner does
    if rate is None:
        for seq, chunk in enumerate(chunks, 1):
            await log.append(key, EXECUTION, [chunk], [seq])
    else:
        coalescer = Coalescer()
        for seq, chunk in enumerate(chunks, 1):
            now = seq / rate
            if coalescer.due is not None and now >= coalescer.due:
                held = coalescer.flush()
                if held:
                    await log.append(key, EXECUTION, held, coalescer.batch_seqs)
            batch = coalescer.push(chunk, now, seq)
            if batch is not None:
                await log.append(key, EXECUTION, batch, coalescer.batch_seqs)
        rest = coalescer.flush()
        if rest:
            await log.append(key, EXECUTION, rest, coalescer.batch_seqs)
    entries = int(await redis.xlen(key))
    memory = 0
    for name in (key, anchors_key(key)):
        memory += int(await redis.memory_usage(name, samples=0) or 0)
    await log.end(key, EXECUTION, "success")
    return entries, memory


async def _main(port: int, sizes: dict[str, int], rates: list[float]) -> dict[str, object]:
    redis = Redis(host="127.0.0.1", port=port)
    figures: dict[str, object] = {"bench": "cluster_memory"}
    for name, deltas in sizes.items():
        chunks, text = _answer(deltas, random.Random(1))
        entries, memory = await _live_stream(redis, chunks, None, f"{name}-naive")
        figures[f"{name}_text_bytes"] = text
        figures[f"{name}_baseline_entries"] = entries
        figures[f"{name}_baseline_memory_bytes"] = memory
        for rate in rates:
            entries, memory = await _live_stream(redis, chunks, rate, f"{name}-{rate}")
            figures[f"{name}_entries_at_{int(rate)}_per_s"] = entries
            figures[f"{name}_memory_bytes_at_{int(rate)}_per_s"] = memory
            figures[f"{name}_memory_per_text_byte_at_{int(rate)}_per_s"] = round(memory / text, 2)
    await redis.aclose()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="the typical answer only")
    args = parser.parse_args()
    sizes = {"typical": 600} if args.quick else {"typical": 600, "long": 2_400}
    rates = [50.0, 200.0]
    server = shutil.which("redis-server")
    if server is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        argv = [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", tmp]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        try:
            _wait_for(port)
            figures = anyio.run(_main, port, sizes, rates)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    for name in sizes:
        print(
            f"{name} answer ({figures[f'{name}_text_bytes']} text bytes): "
            + ", ".join(
                f"{int(rate)}/s: {figures[f'{name}_entries_at_{int(rate)}_per_s']} entries, "
                f"{figures[f'{name}_memory_bytes_at_{int(rate)}_per_s']} B"
                for rate in rates
            )
            + f" (one XADD per chunk: {figures[f'{name}_baseline_entries']} entries, "
            f"{figures[f'{name}_baseline_memory_bytes']} B)"
        )
    emit(figures)


if __name__ == "__main__":
    main()
