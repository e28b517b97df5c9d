"""P8 (part): Redis bytes per text byte of the chunk log: on the wire, and stored.

An answer of 4-8 character text deltas is written to a turn's chunk log the way an owner writes
it: through the ``Coalescer`` (25 ms windows) and ``RedisChunkLog.append`` with the owner's seqs,
fenced with a real lease (``RedisLease``), under the real key names (prefix ``drupe``, a 16
character chat id, a ``<epoch-ms>:<n>`` turn id), with a model id as the execution id, 16 hex
part ids and the anchor row the owner records. The deltas carry synthetic read times at a given
rate (deltas per second), so the figures depend only on the rate, never on the machine's speed.

* Wire (``bytes_per_text_byte_at_<rate>_per_s``): what the Redis server received
  (``INFO stats: total_net_input_bytes``) for the writes AND for ``--readers`` other nodes
  following the turn (each a real ``NodeReader`` on its own connection; the bench waits until
  every reader has each entry before the next write, as entries 25 ms apart are read live: one
  ``XREAD`` per entry per node). ``write_bytes_per_text_byte_at_<rate>_per_s``: the writes alone
  (the same answer again with no reader).
* Stored (``redis_stored_bytes_per_text_byte_at_<rate>_per_s``): ``MEMORY USAGE <key> SAMPLES 0``
  of the turn's keys (the log and its anchors hash) once the turn ended, over the text bytes.

A private ``redis-server`` that this bench starts on a free loopback port, so nothing else's
traffic is counted. The baseline, in the same run: one ``XADD`` per chunk (no coalescing), the
way a naive log writes (writes alone). To compare with another checkout's chunk log, run this
script with ``PYTHONPATH=<that checkout>/src`` (it uses only the log's public API).

    .venv/bin/python bench/cluster_log.py --quick
"""

from __future__ import annotations

import argparse
import contextlib
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
from drupe.cluster.lease import RedisLease
from drupe.cluster.log_encoding import LogEntry
from drupe.cluster.log_writer import anchors_key
from drupe.cluster.reader import NodeReader

PREFIX = "drupe"
EXECUTION = "anthropic:claude-sonnet-4-5-20250929"
NODE = f"{socket.gethostname()}-41234-9f3a"


def _answer(deltas: int, rng: random.Random) -> tuple[list[Chunk], int]:
    part = "".join(rng.choice("0123456789abcdef") for _ in range(16))
    chunks: list[Chunk] = [{"type": "start", "messageId": "msg_" + "7" * 32}]
    chunks.append({"type": "text-start", "id": part})
    text = 0
    for _ in range(deltas):
        delta = "".join(rng.choice("abcdefghij ") for _ in range(rng.randint(4, 8)))
        text += len(delta.encode())
        chunks.append({"type": "text-delta", "id": part, "delta": delta})
    chunks += [{"type": "text-end", "id": part}, {"type": "finish"}]
    return chunks, text


async def _input_bytes(redis: Redis) -> int:
    return int((await redis.info("stats"))["total_net_input_bytes"])


class _Follower:
    """One other node following the turn: its own ``NodeReader`` on its own connection."""

    def __init__(self, port: int) -> None:
        self.redis = Redis(host="127.0.0.1", port=port)
        self.connection = Redis(host="127.0.0.1", port=port, single_connection_client=True)
        self.reader = NodeReader(self.redis, self.connection, RedisChunkLog(self.redis))
        self.entries = 0
        self.target = 0
        self.caught_up = anyio.Event()

    def deliver(self, entry: LogEntry) -> None:
        self.entries += 1
        if self.entries >= self.target:
            self.caught_up.set()

    async def wait_for(self, entries: int) -> None:
        self.target = entries
        if self.entries < entries:
            self.caught_up = anyio.Event()
            await self.caught_up.wait()

    async def aclose(self) -> None:
        await self.connection.aclose()
        await self.redis.aclose()


async def _write(
    redis: Redis, port: int, chunks: list[Chunk], rate: float | None, turn: str, readers: int
) -> tuple[int, int]:
    """Write the answer (``rate`` None: one ``XADD`` per chunk) while ``readers`` nodes follow
    it; return (the bytes Redis received, the turn's keys' ``MEMORY USAGE``)."""
    conversation = "Xq3v9Lk2Pz8Rt5Wm"
    lease = RedisLease(redis, prefix=PREFIX)
    fence = await lease.acquire(conversation, NODE)
    assert fence is not None
    guard = (lease.lease_key(conversation), fence.value)
    log = RedisChunkLog(redis, prefix=PREFIX)
    key = log.key(conversation, turn)
    followers = [_Follower(port) for _ in range(readers)]
    written = 0

    async def caught_up() -> None:
        for follower in followers:
            await follower.wait_for(written)

    async def append(batch: list[Chunk], seqs: list[int]) -> None:
        nonlocal written
        await log.append(key, EXECUTION, batch, seqs, fence=guard)
        written += 1
        await caught_up()

    async with contextlib.AsyncExitStack() as stack:
        for follower in followers:
            stack.push_async_callback(follower.aclose)
            await stack.enter_async_context(follower.reader)
            stack.callback(await follower.reader.watch(key, "0", follower.deliver))
        before = await _input_bytes(redis)
        await redis.hset(anchors_key(key), EXECUTION, "msg_" + "7" * 32)  # as the owner does
        if rate is None:
            for seq, chunk in enumerate(chunks, 1):
                await append([chunk], [seq])
        else:
            coalescer = Coalescer()
            for seq, chunk in enumerate(chunks, 1):
                now = seq / rate
                if coalescer.due is not None and now >= coalescer.due:
                    held = coalescer.flush()
                    if held:
                        await append(held, coalescer.batch_seqs)
                batch = coalescer.push(chunk, now, seq)
                if batch is not None:
                    await append(batch, coalescer.batch_seqs)
            rest = coalescer.flush()
            if rest:
                await append(rest, coalescer.batch_seqs)
        await log.end(key, EXECUTION, "success", fence=guard)
        written += 1
        await caught_up()
        after = await _input_bytes(redis)
    stored = 0
    for name in (key, anchors_key(key)):
        stored += int(await redis.memory_usage(name, samples=0) or 0)
    await lease.release(fence)
    return after - before - 2 * 40, stored  # less the two INFO commands (~40 bytes each)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _main(port: int, deltas: int, rates: list[float], readers: int) -> dict[str, object]:
    redis = Redis(host="127.0.0.1", port=port)
    chunks, text = _answer(deltas, random.Random(1))
    turn = int(time.time() * 1000)
    naive, naive_stored = await _write(redis, port, chunks, None, f"{turn}:1", 0)
    figures: dict[str, object] = {
        "bench": "cluster_log",
        "deltas": deltas,
        "text_bytes": text,
        "readers": readers,
        "baseline_bytes_per_text_byte": round(naive / text, 2),
        "baseline_stored_bytes_per_text_byte": round(naive_stored / text, 2),
    }
    for i, rate in enumerate(rates):
        at = f"at_{int(rate)}_per_s"
        alone, _ = await _write(redis, port, chunks, rate, f"{turn}:{10 + i}", 0)
        wire, stored = await _write(redis, port, chunks, rate, f"{turn}:{20 + i}", readers)
        figures[f"bytes_per_text_byte_{at}"] = round(wire / text, 2)
        figures[f"write_bytes_per_text_byte_{at}"] = round(alone / text, 2)
        figures[f"redis_stored_bytes_per_text_byte_{at}"] = round(stored / text, 2)
    await redis.aclose()
    return figures


def _wait_for(port: int) -> None:
    deadline = time.monotonic() + 60  # a bound for a hang; a busy machine is slow
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
    parser.add_argument("--readers", type=int, default=2, help="other nodes following (2)")
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
            figures = anyio.run(_main, port, deltas, rates, args.readers)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    figures["redis_bytes_per_text_byte"] = figures["bytes_per_text_byte_at_200_per_s"]
    figures["redis_stored_bytes_per_text_byte"] = figures[
        "redis_stored_bytes_per_text_byte_at_200_per_s"
    ]
    for rate in rates:
        at = f"at_{int(rate)}_per_s"
        print(
            f"chunk log, {deltas} deltas of 4-8 characters at {int(rate)}/s: "
            f"{figures[f'bytes_per_text_byte_{at}']} wire bytes per text byte "
            f"(writes {figures[f'write_bytes_per_text_byte_{at}']}, "
            f"+ {args.readers} reading nodes), "
            f"{figures[f'redis_stored_bytes_per_text_byte_{at}']} stored"
        )
    print(
        f"one XADD per chunk: {figures['baseline_bytes_per_text_byte']} written, "
        f"{figures['baseline_stored_bytes_per_text_byte']} stored"
    )
    emit(figures)


if __name__ == "__main__":
    main()
