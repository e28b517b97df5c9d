"""Benchmark (issue 20, Performance): the CPU the identity gate adds per request, and the
database statements a watched live answer costs for authorization.

One process, one event loop, two runtimes over the same kind of embedded SQLite database (each
in its own temporary directory): one with auth on (the default: users ``root`` and ``alice``,
a session made by ``POST /api/auth/login``, a personal token from ``UserStore.create_token``),
one with ``--no-auth`` (``AuthSettings(enabled=False)``). Each runtime gets the real app
(``create_app``).

Part 1, requests: ``--requests`` sequential ``GET /api/limits`` (``--route``) per round through
``httpx.ASGITransport`` (no sockets: the server stack and the client only), for each mode:

* ``off``: the ``--no-auth`` app, the baseline;
* ``session``: the auth app, with alice's session cookie (the cached session lookup: one
  database lookup per ``cache_seconds``, 2 s);
* ``token``: the auth app, with ``Authorization: Bearer drt_...`` (cached the same way);
* ``uncached``: the auth app with a gate whose ``Authenticator`` caches nothing (a database
  lookup per request: what the cache saves), fewer requests (``--uncached-requests``), in
  rounds of its own against ``off`` (its database thread's CPU stays out of the others').

Every mode sends the same headers (the cookie and the bearer token both reach the ``off`` app
too, which ignores them), so only the gate differs. Within a round the modes alternate in
``SLICES`` slices (the order rotating); a round's figure per mode is the process's CPU time
(``time.process_time``) per request. ``us_per_request_<mode>`` is the median over ``--rounds``;
``added_us_<mode>`` the median of the per-round differences from ``off`` (paired: the load a
round saw cancels out), ``_min`` / ``_max`` their range; goal: <= 50 us.

Part 1b, the gate alone: ``AuthGate.run`` over a no-op ASGI app, ``--gate-calls`` calls per
round and mode, same rotation and medians: the gate's own CPU with no framework around it.

Part 2, a live answer: alice (signed in, a cookie) submits on ``scripted:lorem``
(``POST /api/chat``, its stream read to the end) and, on a second connection, watches the live
answer over ``GET /api/chat/{id}/stream`` on a loopback uvicorn server. Two answers of the same
duration (``--stream-seconds``), one of ``--chunks-small`` deltas and one of
``--chunks-large``; a SQLAlchemy ``before_cursor_execute`` listener on the engine counts the
statements of the watch request until its headers (``attach``), then until both streams end
(streaming), and those that touch an identity table (``auth_sessions``, ``users``,
``user_tokens``, ``api_keys``, ``shares``): none may come per chunk.

    python bench/auth.py --quick   # ~25 s
    python bench/auth.py           # ~2.5 min

The last line is one JSON object: ``us_per_request_<mode>``, ``added_us_session`` /
``added_us_token`` / ``added_us_uncached``, ``ratio_session`` / ``ratio_token`` (CPU per
request over ``off``'s), ``gate_us_<mode>``, ``gate_added_us_<mode>``, ``stream_*`` figures
and ``meets_goal``.
"""

from __future__ import annotations

import argparse
import gc
import re
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx

from _common import median, parse_args, run

GOAL_ADDED_US = 50.0
PASSWORD = "bench-password-1"
_IDENTITY_TABLES = re.compile(r"\b(auth_sessions|users|user_tokens|api_keys|shares)\b")


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requests", type=int, default=None, help="requests per round and mode")
    parser.add_argument("--uncached-requests", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None, help="measured rounds (median)")
    parser.add_argument("--gate-calls", type=int, default=None, help="AuthGate.run calls")
    parser.add_argument("--route", default="/api/limits", help="a cheap GET route")
    parser.add_argument("--stream-seconds", type=float, default=None)
    parser.add_argument("--chunks-small", type=int, default=None)
    parser.add_argument("--chunks-large", type=int, default=None)


@asynccontextmanager
async def _runtime(auth: bool) -> AsyncIterator[Any]:
    from drupe.app import open_runtime
    from drupe.settings import AuthSettings, Settings
    from drupe.streaming.config import StreamConfig

    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.toml"
        config.write_text('default_model = "scripted:echo"\n')
        settings = Settings(
            data_dir=Path(tmp),
            config_path=config,
            stream=StreamConfig(grace_period=5),
            auth=AuthSettings(enabled=auth),
        )
        async with open_runtime(settings) as runtime:
            if auth:
                await runtime.db.users.create("root", password=PASSWORD + "x", role="admin")
                await runtime.db.users.create("alice", password=PASSWORD)
            yield runtime


async def _sign_in(client: httpx.AsyncClient) -> str:
    reply = await client.post("/api/auth/login", json={"username": "alice", "password": PASSWORD})
    if reply.status_code != 200:
        raise SystemExit(f"sign-in failed: {reply.status_code} {reply.text}")
    from drupe.identity.credentials import COOKIE_NAME

    cookie = client.cookies.get(COOKIE_NAME)
    if not cookie:
        raise SystemExit("sign-in set no session cookie")
    return str(cookie)


Probe = Callable[[int], Awaitable[None]]


def _request_probe(client: httpx.AsyncClient, route: str, headers: dict[str, str]) -> Probe:
    async def probe(count: int) -> None:
        for _ in range(count):
            reply = await client.get(route, headers=headers)
            if reply.status_code != 200:
                raise SystemExit(f"GET {route}: {reply.status_code} {reply.text[:200]}")

    return probe


def _gate_probe(gate: Any, headers: list[tuple[bytes, bytes]], route: str) -> Probe:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        return None

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        raise SystemExit(f"the gate refused the bench's request: {message}")

    async def probe(count: int) -> None:
        for _ in range(count):
            scope = {"type": "http", "method": "GET", "path": route, "headers": headers}
            await gate.run(app, scope, receive, send)

    return probe


SLICES = 10
"""Each round runs every mode in this many slices, the modes alternating slice by slice, so a
change of the machine's load during a round hits every mode alike."""


async def _cpu_s(probe: Probe, count: int) -> float:
    started = time.process_time()
    await probe(count)
    return time.process_time() - started


async def _rounds(probes: dict[str, tuple[Probe, int]], rounds: int) -> dict[str, list[float]]:
    """CPU us per call of each probe, one sample per round: the modes alternate slice by slice
    within a round (the order rotating), with a full garbage collection before each round."""
    names = list(probes)
    for name in names:  # warm-up: imports, caches, the first session lookup
        probe, count = probes[name]
        await _cpu_s(probe, max(1, count // 5))
    samples: dict[str, list[float]] = {name: [] for name in names}
    for index in range(rounds):
        gc.collect()
        spent = dict.fromkeys(names, 0.0)
        for piece in range(SLICES):
            shift = (index + piece) % len(names)
            for name in names[shift:] + names[:shift]:
                probe, count = probes[name]
                spent[name] += await _cpu_s(probe, max(1, count // SLICES))
        for name in names:
            calls = max(1, probes[name][1] // SLICES) * SLICES
            samples[name].append(spent[name] / calls * 1e6)
    return samples


def _figures(
    label: str, names: tuple[str, str], samples: dict[str, list[float]]
) -> dict[str, float]:
    """Per mode: the median us per call (``<names[0]>_<mode>``), and the median of the per-round
    differences from ``off`` (``<names[1]>_<mode>``, paired within a round: the load a round
    saw cancels out) with their range (``_min``, ``_max``), and the ratio of the medians."""
    value_key, added_key = names
    out: dict[str, float] = {}
    base = samples["off"]
    for mode, values in samples.items():
        value = median(values)
        out[f"{value_key}_{mode}"] = round(value, 2)
        if mode == "off":
            print(f"{label} {mode:>8}: {value:8.2f} us CPU/call")
            continue
        added = [one - ref for one, ref in zip(values, base, strict=True)]
        out[f"{added_key}_{mode}"] = round(median(added), 2)
        out[f"{added_key}_{mode}_min"] = round(min(added), 2)
        out[f"{added_key}_{mode}_max"] = round(max(added), 2)
        out[f"ratio_{mode}" if value_key == "us_per_request" else f"gate_ratio_{mode}"] = round(
            value / median(base), 3
        )
        print(
            f"{label} {mode:>8}: {value:8.2f} us CPU/call, {median(added):+8.2f} us over off "
            f"(rounds: {min(added):+.2f} .. {max(added):+.2f})"
        )
    return out


async def _request_figures(args: argparse.Namespace, on: Any, off: Any) -> dict[str, Any]:
    from drupe.api.app_factory import create_app
    from drupe.identity.authenticator import Authenticator
    from drupe.identity.gate import AuthGate

    requests = args.requests or (400 if args.quick else 3_000)
    uncached = args.uncached_requests or max(50, requests // 4)
    rounds = args.rounds or (5 if args.quick else 9)
    gate_calls = args.gate_calls or (20_000 if args.quick else 200_000)
    on_app, off_app = create_app(on), create_app(off)
    uncached_app = create_app(on)
    uncached_gate = AuthGate(authenticator=Authenticator(on.db, cache_seconds=0))
    async with AsyncExitStack() as stack:

        def client(app: Any) -> httpx.AsyncClient:
            transport = httpx.ASGITransport(app=app)
            return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")

        on_client = await stack.enter_async_context(client(on_app))
        off_client = await stack.enter_async_context(client(off_app))
        uncached_client = await stack.enter_async_context(client(uncached_app))
        cookie = await _sign_in(on_client)
        on_client.cookies.clear()
        token, _ = await on.db.users.create_token("alice", "bench")
        uncached_app.state.auth_gate = uncached_gate
        session_headers = {"cookie": f"drupe_session={cookie}"}
        token_headers = {"authorization": f"Bearer {token}"}
        both = {**session_headers, **token_headers}
        route = args.route
        per_request = await _rounds(
            {
                "off": (_request_probe(off_client, route, both), requests),
                "session": (_request_probe(on_client, route, session_headers), requests),
                "token": (_request_probe(on_client, route, token_headers), requests),
            },
            rounds,
        )
        # Apart: its database work (a thread of its own) must not land in the others' slices.
        per_uncached = await _rounds(
            {
                "off": (_request_probe(off_client, route, both), uncached),
                "uncached": (_request_probe(uncached_client, route, session_headers), uncached),
            },
            rounds,
        )
        raw_session = [(k.encode(), v.encode()) for k, v in session_headers.items()]
        raw_token = [(k.encode(), v.encode()) for k, v in token_headers.items()]
        gate_on, gate_off = on_app.state.auth_gate, off_app.state.auth_gate
        per_gate = await _rounds(
            {
                "off": (_gate_probe(gate_off, raw_session + raw_token, route), gate_calls),
                "session": (_gate_probe(gate_on, raw_session, route), gate_calls),
                "token": (_gate_probe(gate_on, raw_token, route), gate_calls),
            },
            rounds,
        )
    out: dict[str, Any] = {"requests": requests, "rounds": rounds, "route": route}
    out.update(_figures(f"GET {route}", ("us_per_request", "added_us"), per_request))
    uncached_figures = _figures(
        f"GET {route} (own rounds)", ("us_per_request", "added_us"), per_uncached
    )
    out.update(
        {k: v for k, v in uncached_figures.items() if k.endswith(("uncached", "_min", "_max"))}
    )
    out["gate_calls"] = gate_calls
    out.update(_figures("AuthGate.run alone", ("gate_us", "gate_added_us"), per_gate))
    return out


async def _read_sse(stream: httpx.Response) -> int:
    """Read an SSE answer to ``[DONE]``; the number of ``text-delta`` frames."""
    if stream.status_code != 200:
        await stream.aread()
        raise SystemExit(f"{stream.request.url.path}: {stream.status_code} {stream.text[:300]}")
    frames = 0
    async for line in stream.aiter_lines():
        if line == "data: [DONE]":
            return frames
        if line.startswith("data: ") and '"text-delta"' in line:
            frames += 1
    raise SystemExit(f"{stream.request.url.path}: the stream ended without [DONE]")


def _identity_statements(statements: list[str]) -> int:
    return sum(1 for statement in statements if _IDENTITY_TABLES.search(statement))


async def _watch(
    client: httpx.AsyncClient, conversation: str, words: int, rate: float, counter: list[str]
) -> dict[str, int]:
    """Alice submits (``POST /api/chat``, read to its end) and, on another connection, watches
    the live answer (``GET /api/chat/{id}/stream``) to ``[DONE]``. Counted: the SQL statements
    of the watch request until its headers (the gate and the access check: ``attach_*``), then
    those until both streams ended (``streaming``), and the watcher's text-delta frames."""
    body = {
        "id": conversation,
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}],
        "models": [f"scripted:lorem?words={words}&rate={rate:g}"],
    }
    async with (
        client.stream("POST", "/api/chat", json=body) as poster,
        anyio.create_task_group() as group,
    ):
        group.start_soon(_read_sse, poster)
        counter.clear()
        async with client.stream("GET", f"/api/chat/{conversation}/stream") as watcher:
            attach = list(counter)
            counter.clear()
            frames = await _read_sse(watcher)
    streaming = list(counter)
    return {
        "frames": frames,
        "attach_statements": len(attach),
        "attach_auth_statements": _identity_statements(attach),
        "statements": len(streaming),
        "auth_statements": _identity_statements(streaming),
    }


async def _stream_figures(args: argparse.Namespace, on: Any) -> dict[str, Any]:
    from sqlalchemy import event

    from drupe.api.app_factory import create_app
    from drupe.testing.loopback import serve_app

    seconds = args.stream_seconds or (1.0 if args.quick else 3.0)
    small = args.chunks_small or (50 if args.quick else 200)
    large = args.chunks_large or (500 if args.quick else 3_000)
    statements: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        statements.append(statement)

    engine = on.db.engine.sync_engine
    event.listen(engine, "before_cursor_execute", count)
    out: dict[str, Any] = {"stream_seconds": seconds}
    try:
        async with (
            serve_app(create_app(on)) as url,
            httpx.AsyncClient(base_url=url, timeout=60) as client,
        ):
            client.headers["origin"] = url
            await _sign_in(client)
            for label, words in (("small", small), ("large", large)):
                seen = await _watch(client, f"bench-{label}", words, words / seconds, statements)
                out[f"stream_chunks_{label}"] = words
                for key, value in seen.items():
                    out[f"stream_{key}_{label}"] = value
                print(
                    f"watched answer of {words} deltas over {seconds:g} s: {seen['frames']} "
                    f"text-delta frames; attach: {seen['attach_statements']} SQL statements "
                    f"({seen['attach_auth_statements']} on identity tables); while streaming: "
                    f"{seen['statements']} ({seen['auth_statements']} on identity tables)"
                )
    finally:
        event.remove(engine, "before_cursor_execute", count)
    # A periodic check (a revocation sweep) may run once more in one window than the other.
    grows = out["stream_auth_statements_large"] > out["stream_auth_statements_small"] + 2
    out["stream_auth_statements_per_chunk"] = round(out["stream_auth_statements_large"] / large, 4)
    out["stream_auth_grows_with_chunks"] = grows
    return out


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    async with _runtime(True) as on, _runtime(False) as off:
        summary: dict[str, Any] = {"bench": "auth"}
        summary.update(await _request_figures(args, on, off))
        summary.update(await _stream_figures(args, on))
    added = max(summary["added_us_session"], summary["added_us_token"])
    summary["goal_added_us"] = GOAL_ADDED_US
    summary["meets_goal"] = added <= GOAL_ADDED_US and not summary["stream_auth_grows_with_chunks"]
    print(
        f"auth adds {summary['added_us_session']:+.1f} us (session) / "
        f"{summary['added_us_token']:+.1f} us (token) of CPU per request "
        f"(ratios {summary['ratio_session']:.3f} / {summary['ratio_token']:.3f}; goal <= "
        f"{GOAL_ADDED_US:g} us); a DB lookup per request adds {summary['added_us_uncached']:+.1f}"
        f" us; identity-table statements while watching: "
        f"{summary['stream_auth_statements_small']} ({summary['stream_chunks_small']} chunks) / "
        f"{summary['stream_auth_statements_large']} ({summary['stream_chunks_large']} chunks)"
    )
    return summary


if __name__ == "__main__":
    arguments = parse_args(__doc__.splitlines()[0], _arguments)
    run(lambda: _main(arguments), arguments)
