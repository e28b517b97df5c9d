"""P8 (part): Redis bytes written per text byte by the chunk log, with and without coalescing.

An answer of 4-8 character text deltas is written to a turn's chunk log the way an owner writes
it: through the ``Coalescer`` (25 ms windows) and ``RedisChunkLog.append``. The deltas carry
synthetic read times at a given rate (deltas per second), so the figure depends only on the rate,
never on the machine's speed. The bytes are what the Redis server received
(``INFO stats: total_net_input_bytes``) from a private ``redis-server`` that this bench starts
on a free loopback port, so nothing else's traffic is counted.

The baseline, in the same run: one ``XADD`` per chunk (no coalescing), the way a naive log writes.

    .venv/bin/python bench/cluster_log.py --quick
"""

from __future__ import annotations

import argparse
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio
from bench._common import emit
from redis.asyncio import Redis

from drupe.chunks.types import Chunk
from drupe.cluster.chunk_log import RedisChunkLog
from drupe.cluster.coalesce import Coalescer


def _answer(deltas: int, rng: random.Random) -> tuple[list[Chunk], int]:
    chunks: list[Chunk] = [{"type": "start", "messageId": "msg-0001"}]
    chunks.append({"type": "text-start", "id": "txt-0"})
    text = 0
    for _ in range(deltas):
        delta = "".join(rng.choice("abcdefghij ") for _ in range(rng.randint(4, 8)))
        text += len(delta.encode())
        chunks.append({"type": "text-delta", "id": "txt-0", "delta": delta})
    chunks += [{"type": "text-end", "id": "txt-0"}, {"type": "finish"}]
    return chunks, text


async def _input_bytes(redis: Redis) -> int:
    return int((await redis.info("stats"))["total_net_input_bytes"])


async def _write(redis: Redis, chunks: list[Chunk], rate: float | None, key: str) -> int:
    """Write the answer; return the bytes Redis received for it."""
    log = RedisChunkLog(redis, prefix="bench")
    before = await _input_bytes(redis)
    if rate is None:
        for chunk in chunks:
            await log.append(key, "e1", [chunk])
    else:
        coalescer = Coalescer()
        for i, chunk in enumerate(chunks):
            now = i / rate
            if coalescer.due is not None and now >= coalescer.due:
                held = coalescer.flush()
                if held:
                    await log.append(key, "e1", held)
            batch = coalescer.push(chunk, now)
            if batch is not None:
                await log.append(key, "e1", batch)
        rest = coalescer.flush()
        if rest:
            await log.append(key, "e1", rest)
    await log.end(key, "e1", "success")
    after = await _input_bytes(redis)
    return after - before - 2 * 40  # less the two INFO commands (~40 bytes each)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _main(port: int, deltas: int, rates: list[float]) -> dict[str, object]:
    redis = Redis(host="127.0.0.1", port=port)
    chunks, text = _answer(deltas, random.Random(1))
    naive = await _write(redis, chunks, None, "naive")
    figures: dict[str, object] = {
        "bench": "cluster_log",
        "deltas": deltas,
        "text_bytes": text,
        "baseline_bytes_per_text_byte": round(naive / text, 2),
    }
    for rate in rates:
        written = await _write(redis, chunks, rate, f"rate-{rate}")
        figures[f"bytes_per_text_byte_at_{int(rate)}_per_s"] = round(written / text, 2)
    await redis.aclose()
    return figures


def _wait_for(port: int) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="2,000 deltas instead of 20,000")
    parser.add_argument("--deltas", type=int, default=None)
    args = parser.parse_args()
    deltas = args.deltas or (2_000 if args.quick else 20_000)
    rates = [50.0, 200.0, 1000.0]
    server = shutil.which("redis-server")
    if server is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        argv = [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", tmp]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        try:
            _wait_for(port)
            figures = anyio.run(_main, port, deltas, rates)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    key = "bytes_per_text_byte_at_200_per_s"
    figures["redis_bytes_per_text_byte"] = figures[key]
    print(
        f"chunk log, {deltas} deltas of 4-8 characters: "
        + ", ".join(f"{k.split('_at_')[1]}: {v}" for k, v in figures.items() if "_at_" in k)
        + f" bytes per text byte (one XADD per chunk: {figures['baseline_bytes_per_text_byte']})"
    )
    emit(figures)


if __name__ == "__main__":
    main()
