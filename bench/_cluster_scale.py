"""``cluster_fanout.py --scale``: many paced answers on 3 nodes, each followed on another node.

The orchestrator (``scale_phase``) starts ``--scale-streams`` (300) answers of ``--scale-words``
lorem words paced at ``--scale-rate`` (50) deltas/s, answer ``i`` owned by node ``i % 3`` (its
``POST /api/chat`` stays open on that node: the single-node path) and followed by ONE
``GET /api/chat/{id}/stream`` on node ``(i + 1) % 3`` (the cluster path: the owner's coalesced
log writes, Redis, the follower's node reader). Every connection is HTTP/1.0 (no chunked
encoding), read by one client process (``client_scale``) that parses every frame and records,
per connection, when its text reached each length (``time.monotonic``, one clock for every
process on Linux).

Figures (Redis counters read before and after, from the bench's own ``redis-server``):

* ``scale_redis_bytes_per_text_byte``: ``total_net_input_bytes`` over the text bytes of the
  answers (each answer's text once). Goal <= 3.
* ``scale_redis_commands_per_stream_s``: ``INFO commandstats`` calls over stream-seconds (the
  sum of the answers' durations at their owners); commands run inside a function (``FCALL``)
  count too, as Redis counts them. Goal <= 10. ``scale_commands`` breaks them down per command.
* ``scale_delivered_ratio``: text characters the followers received over the characters
  expected (``scale_exact_answers``: followers whose text equals the answer). Goal 1.0.
* ``scale_p50/p99_added_ms``: for each delta (each text length the owner's own reader
  reached), the time the follower reached that length minus the owner reader's time: the delay
  the cluster adds over one node, in the same run.
* ``scale_redis_cpu_s_per_1000_stream_s``: Redis's CPU seconds (``used_cpu_sys + user``) per
  1,000 stream-seconds.
* ``scale_redis_commands_per_answer``: the same commands over the answers (independent of how
  fast the answers streamed, which the per-stream-second figure is not).
* ``scale_p50_owner_done_s`` / ``scale_p50_follower_done_s`` / ``scale_p99_follower_done_s``:
  from the ``POST`` sent to the owner's / the follower's ``[DONE]`` (an answer paces
  ``--scale-words / --scale-rate`` seconds): the end-to-end time, not relative to another
  reader, so a backlog that delays both readers alike shows here and not in ``added``.
"""

from __future__ import annotations

import asyncio
import json
import time
from statistics import median
from typing import Any

import anyio
import orjson

__all__ = ["client_scale", "scale_figures"]


class _Stream(asyncio.Protocol):
    """One SSE response over HTTP/1.0: text length over time, to ``[DONE]``."""

    def __init__(self, request: bytes, done: asyncio.Future[None]) -> None:
        self.request = request
        self.done_future = done
        self.buffer = b""
        self.headers_done = False
        self.status = 0
        self.length = 0
        self.marks: list[tuple[float, int]] = []
        self.text: list[str] = []
        self.finished = False
        self.first_text: float | None = None
        self.ended: float | None = None
        self.headers = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        self.buffer += data
        if not self.headers_done:
            if b"\r\n\r\n" not in self.buffer:
                return
            head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
            self.status = int(head.split(b" ", 2)[1])
            self.headers_done = True
            if not self.headers.done():
                self.headers.set_result(self.status)
        *events, self.buffer = self.buffer.split(b"\n\n")
        grew = False
        for event in events:
            for line in event.split(b"\n"):
                if not line.startswith(b"data: "):
                    continue
                raw = line[6:]
                if raw == b"[DONE]":
                    self.finished = True
                    self.ended = now
                    continue
                if b'"text-delta"' not in raw:
                    continue
                delta = orjson.loads(raw)["delta"]
                self.text.append(delta)
                self.length += len(delta)
                grew = True
        if grew:
            if self.first_text is None:
                self.first_text = now
            self.marks.append((now, self.length))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.headers.done():
            self.headers.set_result(self.status)
        if self.ended is None:
            self.ended = time.monotonic()
        if not self.done_future.done():
            self.done_future.set_result(None)


def _request(method: str, path: str, body: bytes | None = None) -> bytes:
    head = f"{method} {path} HTTP/1.0\r\nhost: 127.0.0.1\r\n"
    if body is None:
        return (head + "\r\n").encode()
    return (
        head + f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode() + body


def _added_ms(owner: _Stream, follower: _Stream) -> list[float]:
    """For each text length the owner's reader reached (each delta), the time the follower
    reached it minus the owner reader's time (a delta held in a coalesced batch counts its
    whole wait)."""
    out: list[float] = []
    marks = follower.marks
    j = 0
    for when, length in owner.marks:
        while j < len(marks) and marks[j][1] < length:
            j += 1
        if j == len(marks):
            break
        out.append((marks[j][0] - when) * 1000)
    return out


async def client_scale(spec: dict[str, Any]) -> None:
    """Run ``spec['pairs']`` ([conversation, owner_port, follower_port], ...): each answer's
    POST on its owner, then its follower once the POST's headers came; print one JSON line."""
    from drupe.agent.models.scripted import lorem

    loop = asyncio.get_running_loop()
    expected = lorem(spec["words"])
    model = spec["model"]

    async def open_stream(port: int, request: bytes) -> _Stream:
        done: asyncio.Future[None] = loop.create_future()
        stream = _Stream(request, done)
        await loop.create_connection(lambda: stream, "127.0.0.1", port)
        return stream

    async def pair(conversation: str, owner_port: int, follower_port: int) -> dict[str, Any]:
        body = orjson.dumps(
            {
                "id": conversation,
                "trigger": "submit-message",
                "messages": [
                    {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}
                ],
                "models": [model],
            }
        )
        sent = time.monotonic()
        owner = await open_stream(owner_port, _request("POST", "/api/chat", body))
        if await owner.headers != 200:
            return {"error": f"POST {owner.status}"}
        follower = None
        for _ in range(50):  # the turn is live on every node once the submit is acknowledged
            follower = await open_stream(
                follower_port, _request("GET", f"/api/chat/{conversation}/stream")
            )
            if await follower.headers == 200:
                break
            await asyncio.sleep(0.05)
        assert follower is not None
        with anyio.fail_after(600):
            await owner.done_future
            await follower.done_future
        return {
            "owner_ok": owner.finished and "".join(owner.text) == expected,
            "follower_ok": follower.finished and "".join(follower.text) == expected,
            "follower_chars": follower.length,
            "stream_s": (owner.ended or 0) - (owner.first_text or owner.ended or 0),
            "added_ms": _added_ms(owner, follower),
            "owner_done_s": (owner.ended or sent) - sent,
            "follower_done_s": (follower.ended or sent) - sent,
            "follower_status": follower.status,
        }

    started = time.monotonic()
    results: list[dict[str, Any]] = []

    async def run(conversation: str, owner_port: int, follower_port: int) -> None:
        results.append(await pair(conversation, owner_port, follower_port))

    async with anyio.create_task_group() as group:
        for conversation, owner_port, follower_port in spec["pairs"]:
            group.start_soon(run, conversation, owner_port, follower_port)
    elapsed = time.monotonic() - started
    errors = [r["error"] for r in results if "error" in r]
    good = [r for r in results if "error" not in r]
    added = sorted(ms for r in good for ms in r["added_ms"])

    def pct(q: float) -> float:
        return added[min(len(added) - 1, int(q * len(added)))] if added else float("nan")

    print(
        json.dumps(
            {
                "answers": len(results),
                "errors": errors[:3],
                "owner_exact": sum(1 for r in good if r["owner_ok"]),
                "follower_exact": sum(1 for r in good if r["follower_ok"]),
                "follower_chars": sum(r["follower_chars"] for r in good),
                "expected_chars": len(expected) * len(results),
                "stream_seconds": sum(r["stream_s"] for r in good),
                "median_stream_s": median(r["stream_s"] for r in good) if good else 0,
                "elapsed_s": elapsed,
                "added_samples": len(added),
                "p50_added_ms": pct(0.5),
                "p99_added_ms": pct(0.99),
                "max_added_ms": added[-1] if added else float("nan"),
                "owner_done_s": sorted(r["owner_done_s"] for r in good),
                "follower_done_s": sorted(r["follower_done_s"] for r in good),
            }
        ),
        flush=True,
    )


def redis_counters(redis: Any) -> dict[str, Any]:
    """The Redis counters the figures need, now."""
    stats = redis.info("stats")
    cpu = redis.info("cpu")
    commands = {
        name.removeprefix("cmdstat_"): int(value["calls"])
        for name, value in redis.info("commandstats").items()
    }
    return {
        "input_bytes": int(stats["total_net_input_bytes"]),
        "cpu_s": float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]),
        "commands": commands,
    }


def _quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of sorted ``values`` (seconds, 3 decimals); NaN when empty."""
    if not values:
        return float("nan")
    return round(values[min(len(values) - 1, int(q * len(values)))], 3)


def scale_figures(
    before: dict[str, Any], after: dict[str, Any], client: dict[str, Any], text_bytes: int
) -> dict[str, Any]:
    """The ``scale_*`` figures from the counters around one run and the client's line."""
    stream_s = max(client["stream_seconds"], 1e-9)
    calls = {
        name: after["commands"].get(name, 0) - before["commands"].get(name, 0)
        for name in after["commands"]
    }
    calls = {name: n for name, n in calls.items() if n > 0 and name != "info"}
    total = sum(calls.values())
    return {
        "scale_redis_bytes_per_text_byte": round(
            (after["input_bytes"] - before["input_bytes"]) / text_bytes, 3
        ),
        "scale_redis_commands_per_stream_s": round(total / stream_s, 2),
        "scale_commands": {
            name: round(n / stream_s, 2) for name, n in sorted(calls.items(), key=lambda c: -c[1])
        },
        "scale_delivered_ratio": round(client["follower_chars"] / client["expected_chars"], 4),
        "scale_exact_answers": f"{client['follower_exact']}/{client['answers']}",
        "scale_owner_exact_answers": f"{client['owner_exact']}/{client['answers']}",
        "scale_p50_added_ms": round(client["p50_added_ms"], 2),
        "scale_p99_added_ms": round(client["p99_added_ms"], 2),
        "scale_max_added_ms": round(client["max_added_ms"], 2),
        "scale_redis_cpu_s_per_1000_stream_s": round(
            (after["cpu_s"] - before["cpu_s"]) / stream_s * 1000, 3
        ),
        "scale_redis_commands_per_answer": round(total / max(client["answers"], 1), 1),
        "scale_p50_owner_done_s": _quantile(client.get("owner_done_s", []), 0.5),
        "scale_p50_follower_done_s": _quantile(client.get("follower_done_s", []), 0.5),
        "scale_p99_follower_done_s": _quantile(client.get("follower_done_s", []), 0.99),
        "scale_stream_seconds": round(stream_s, 1),
        "scale_median_stream_s": round(client["median_stream_s"], 2),
        "scale_elapsed_s": round(client["elapsed_s"], 2),
    }
