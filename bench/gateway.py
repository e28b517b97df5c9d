"""Benchmark P4: the latency Drupe's OpenAI-compatible gateway adds, against LiteLLM's proxy.

Four servers, each its own process on loopback, all started by this script in one run:

* the fake OpenAI upstream (``python -m drupe.testing.fake_providers openai``), answering every
  chat completion with the same ``--words`` words (one SSE delta per word when streaming);
* Drupe (``create_app_with_lifespan`` under uvicorn), with an ``openai-compatible`` provider
  ``fake`` pointing at the upstream, a fresh SQLite database and one bearer API key;
* the floor: a bare aiohttp relay (``_FLOOR_SERVER``) that forwards the body to the upstream
  and streams the answer back, with no routing, checks or parsing;
* LiteLLM's proxy (``litellm --model openai/fake --api_base <upstream>``), installed into the
  separate venv ``bench/.venv/litellm`` (created on first use; never the project's venv).

The client (this process, httpx with keep-alive) sends the same chat request directly to the
upstream, through Drupe and through LiteLLM, and the same prompt to Drupe's Responses API
(``POST /v1/responses``, ``store: false``: the dialect, not the database write, is measured;
target ``drupe_responses``, whose overhead is against the same direct chat completion).
Phases, non-streaming and streaming (latency = until the last byte):

1. interleaved rounds (the order rotates), one request at a time: a request's overhead is its
   latency through a proxy minus the direct latency of the same round;
2. CPU: each target alone for as many requests, its server process's CPU time per request
   (from ``/proc``; Drupe's two targets share one process, so each is measured alone);
3. concurrency at 4 and 16 clients: each target in turn (the order rotates per repeat), the
   overhead is the target's p50/p99 minus direct's; at 1 client the figures of phase 1.

    python bench/gateway.py --quick   # about 60 s once LiteLLM is installed
    python bench/gateway.py           # more rounds, more repeats
    python bench/gateway.py --quick --agent-loop   # Drupe with the pass-through off

The last line is one JSON object: ``overhead_p50_ms`` / ``overhead_p99_ms`` (Drupe minus direct,
the worse of the two modes; goal P4: <= 2 / 5 ms), ``cpu_ms_over_direct`` (Drupe's CPU per
request minus the upstream's, the worse mode; goal <= 2 ms), ``ratio_p50`` / ``ratio_p99``
(Drupe's overhead / LiteLLM's, the worst over 1, 4 and 16 clients and both modes; goal <= 0.5),
``concurrency`` (per level and mode: each target's p50/p99 overhead and the two ratios),
``modes`` (per mode: phase 1 and phase 2 figures), ``goals_met`` / ``meets_goal``,
``floor_p50_ms`` / ``floor_p99_ms`` (the same overheads of a bare aiohttp relay: the cost of one
extra loopback hop on this machine, in this run), plus
``drupe_p50_ms`` / ``drupe_p99_ms`` (= the overheads), ``drupe_responses_p50_ms`` /
``drupe_responses_p99_ms`` and ``responses_vs_chat_p50``. When LiteLLM cannot be installed or
started, its figures and the ratios are null and ``litellm_error`` says why; Drupe's figures
are still measured.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx

BENCH_DIR = Path(__file__).resolve().parent
LITELLM_VENV = BENCH_DIR / ".venv" / "litellm"
LITELLM_BIN = LITELLM_VENV / "bin" / "litellm"
GOAL_RATIO = 0.5
GOAL_P50_MS = 2.0
GOAL_P99_MS = 5.0
GOAL_CPU_MS = 2.0

_DRUPE_SERVER = """
import sys
from pathlib import Path

import uvicorn

from drupe.api.app_factory import create_app_with_lifespan
from drupe.settings import AuthSettings, Settings

data_dir, config, port = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
passthrough = sys.argv[4] == "on"
app = create_app_with_lifespan(
    Settings(
        data_dir=data_dir,
        config_path=config,
        gateway_passthrough=passthrough,
        auth=AuthSettings(enabled=False),
    )
)
uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
"""

_FLOOR_SERVER = """
import asyncio
import sys

import aiohttp
import uvloop
from aiohttp import web

upstream, port = sys.argv[1], int(sys.argv[2])


async def relay(request):
    body = await request.read()
    headers = {"content-type": "application/json"}
    async with request.app["session"].post(upstream, data=body, headers=headers) as answer:
        kind = answer.headers.get("content-type", "application/json")
        response = web.StreamResponse(status=answer.status, headers={"content-type": kind})
        await response.prepare(request)
        async for data in answer.content.iter_any():
            await response.write(data)
        await response.write_eof()
        return response


async def session(app):
    app["session"] = aiohttp.ClientSession()
    yield
    await app["session"].close()


asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
app = web.Application()
app.cleanup_ctx.append(session)
app.router.add_post("/v1/chat/completions", relay)
web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)
"""
"""The floor: a bare relay (aiohttp server and client, no routing, no checks) in front of the
same upstream: what one extra loopback hop costs on this machine, in the same run."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def _ms(value: float) -> float:
    return round(value * 1000, 3)


_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` and every live descendant (from ``/proc``)."""
    stats: dict[int, tuple[int, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rfind(")") + 2 :].split()
        stats[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICKS)
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        if current in stats:
            total += stats[current][1]
        todo += [child for child, (parent, _) in stats.items() if parent == current]
    return total


# --- processes -------------------------------------------------------------------------------


@dataclass
class Server:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-800:]
        except OSError:
            return ""


def _spawn(name: str, argv: list[str], workdir: Path, env: dict[str, str] | None = None) -> Server:
    log = workdir / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    return Server(name, process, log)


async def _wait_ready(server: Server, url: str, within: float, headers: dict[str, str]) -> None:
    deadline = time.monotonic() + within
    async with httpx.AsyncClient(timeout=2) as client:
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                raise RuntimeError(f"{server.name} exited: {server.tail()}")
            try:
                response = await client.get(url, headers=headers)
                if response.status_code < 500:
                    return
            except httpx.TransportError:
                pass
            await anyio.sleep(0.2)  # polling a starting process: there is nothing to wait on
    raise RuntimeError(f"{server.name} did not become ready in {within:.0f} s: {server.tail()}")


def ensure_litellm(install: bool) -> str | None:
    """Make sure the LiteLLM venv exists; return an error message when it cannot."""
    if LITELLM_BIN.exists():
        return None
    if not install:
        return f"LiteLLM is not installed at {LITELLM_VENV} (run without --no-install)"
    print(f"installing litellm[proxy] into {LITELLM_VENV} (one time, about a minute)")
    try:
        subprocess.run([sys.executable, "-m", "venv", str(LITELLM_VENV)], check=True)
        subprocess.run(
            [str(LITELLM_VENV / "bin" / "pip"), "install", "-q", "litellm[proxy]"],
            check=True,
            timeout=900,
        )
    except (OSError, subprocess.SubprocessError) as err:
        shutil.rmtree(LITELLM_VENV, ignore_errors=True)
        return f"installing litellm[proxy] failed: {err}"
    return None if LITELLM_BIN.exists() else "the litellm command is missing after install"


async def _drupe_key(data_dir: Path) -> str:
    from drupe.persistence.db import open_database

    async with open_database(None, data_dir=data_dir) as db:
        key, _ = await db.api_keys.create("bench")
    return key


# --- measuring -------------------------------------------------------------------------------


@dataclass
class Target:
    name: str
    url: str
    model: str
    key: str
    pid: int
    api: str = "chat"
    """``chat`` (``/chat/completions``) or ``responses`` (``/responses``, Drupe only)."""
    client: httpx.AsyncClient = field(init=False)

    def open(self) -> None:
        self.client = httpx.AsyncClient(
            base_url=self.url,
            headers={"authorization": f"Bearer {self.key}"},
            timeout=30,
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=64),
        )

    async def request(self, stream: bool) -> float:
        path = "/chat/completions"
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": "Say something."}],
            "stream": stream,
        }
        if self.api == "responses":
            path = "/responses"
            body = {"model": self.model, "input": "Say something.", "stream": stream}
            body["store"] = False
        start = time.perf_counter()
        try:
            if stream:
                async with self.client.stream("POST", path, json=body) as response:
                    async for _ in response.aiter_raw():
                        pass
                    status = response.status_code
            else:
                response = await self.client.post(path, json=body)
                status = response.status_code
        except httpx.HTTPError as err:
            raise RuntimeError(f"{self.name}: {err!r}") from err
        elapsed = time.perf_counter() - start
        if status != 200:
            raise RuntimeError(f"{self.name}: HTTP {status}")
        return elapsed


async def sequential(targets: list[Target], rounds: int, stream: bool) -> dict[str, list[float]]:
    """Interleaved rounds; returns each proxy's per-round overheads (seconds)."""
    direct, proxies = targets[0], targets[1:]
    overheads: dict[str, list[float]] = {t.name: [] for t in proxies}
    latencies: dict[str, list[float]] = {t.name: [] for t in targets}
    for index in range(rounds):
        order = targets[index % len(targets) :] + targets[: index % len(targets)]
        seen = {t.name: await t.request(stream) for t in order}
        for name, value in seen.items():
            latencies[name].append(value)
        for proxy in proxies:
            overheads[proxy.name].append(seen[proxy.name] - seen[direct.name])
    return {**{f"overhead:{k}": v for k, v in overheads.items()}, **latencies}


async def concurrent(target: Target, workers: int, per_worker: int, stream: bool) -> list[float]:
    results: list[float] = []

    async def worker() -> None:
        for _ in range(per_worker):
            results.append(await target.request(stream))

    async with anyio.create_task_group() as tg:
        for _ in range(workers):
            tg.start_soon(worker)
    return results


async def cpu_per_request(target: Target, requests: int, stream: bool) -> float:
    """CPU seconds ``target``'s server process spends per request, that target alone running."""
    before = _cpu_seconds(target.pid)
    for _ in range(requests):
        await target.request(stream)
    return (_cpu_seconds(target.pid) - before) / requests


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="drupe-bench-gateway-"))
    servers: list[Server] = []
    summary: dict[str, Any] = {"words": args.words}
    litellm_error = (
        "LiteLLM left out (--no-litellm)"
        if args.no_litellm
        else ensure_litellm(install=not args.no_install)
    )
    try:
        upstream_port, drupe_port, litellm_port = _free_port(), _free_port(), _free_port()
        floor_port = _free_port()
        upstream_url = f"http://127.0.0.1:{upstream_port}/v1"
        upstream = _spawn(
            "upstream",
            [
                *(sys.executable, "-m", "drupe.testing.fake_providers", "openai"),
                *("--port", str(upstream_port), "--words", str(args.words)),
            ],
            workdir,
        )
        servers.append(upstream)

        config = workdir / "config.toml"
        config.write_text(
            f'[providers.fake]\ntype = "openai-compatible"\nbase_url = "{upstream_url}"\n'
            'models = ["fake"]\n'
        )
        data_dir = workdir / "drupe"
        data_dir.mkdir()
        drupe_key = await _drupe_key(data_dir)
        drupe = _spawn(
            "drupe",
            [
                *(sys.executable, "-c", _DRUPE_SERVER, str(data_dir), str(config)),
                *(str(drupe_port), "off" if args.agent_loop else "on"),
            ],
            workdir,
        )
        servers.append(drupe)
        floor = _spawn(
            "floor",
            [
                *(sys.executable, "-c", _FLOOR_SERVER),
                *(f"{upstream_url}/chat/completions", str(floor_port)),
            ],
            workdir,
        )
        servers.append(floor)

        master_key = "sk-bench-" + secrets.token_hex(16)
        litellm: Server | None = None
        if litellm_error is None:
            env = {
                **os.environ,
                "OPENAI_API_KEY": "sk-fake",
                "LITELLM_MASTER_KEY": master_key,
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "LITELLM_TELEMETRY": "False",
                "LITELLM_LOG": "ERROR",
            }
            litellm = _spawn(
                "litellm",
                [
                    *(str(LITELLM_BIN), "--model", "openai/fake", "--api_base", upstream_url),
                    *("--host", "127.0.0.1", "--port", str(litellm_port)),
                ],
                workdir,
                env,
            )
            servers.append(litellm)

        await _wait_ready(upstream, f"{upstream_url}/models", 30, {})
        await _wait_ready(
            drupe,
            f"http://127.0.0.1:{drupe_port}/v1/models",
            60,
            {"authorization": f"Bearer {drupe_key}"},
        )
        floor_url = f"http://127.0.0.1:{floor_port}/v1"
        await _wait_ready(floor, f"http://127.0.0.1:{floor_port}/", 30, {})
        targets = [
            Target("direct", upstream_url, "fake", "sk-fake", upstream.process.pid),
            Target("floor", floor_url, "fake", "sk-fake", floor.process.pid),
            Target(
                "drupe",
                f"http://127.0.0.1:{drupe_port}/v1",
                "fake:fake",
                drupe_key,
                drupe.process.pid,
            ),
            Target(
                "drupe_responses",
                f"http://127.0.0.1:{drupe_port}/v1",
                "fake:fake",
                drupe_key,
                drupe.process.pid,
                api="responses",
            ),
        ]
        if litellm is not None:
            started = time.monotonic()
            try:
                await _wait_ready(
                    litellm, f"http://127.0.0.1:{litellm_port}/health/liveliness", 120, {}
                )
                summary["litellm_startup_s"] = round(time.monotonic() - started, 1)
                url = f"http://127.0.0.1:{litellm_port}"
                targets.append(
                    Target("litellm", url, "openai/fake", master_key, litellm.process.pid)
                )
            except RuntimeError as err:
                litellm_error = str(err)
        for target in targets:
            target.open()
        try:
            summary.update(await _run_phases(targets, args))
        finally:
            for target in targets:
                await target.client.aclose()
    finally:
        for server in reversed(servers):
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    if litellm_error is not None:
        summary["litellm_error"] = litellm_error
    return summary


LEVELS = (1, 4, 16)
"""Concurrent clients per target in the concurrency phase (goal P4 names these three)."""


def _ratio(drupe: float, litellm: float) -> float | None:
    return round(drupe / litellm, 3) if litellm > 0 else None


async def _run_phases(targets: list[Target], args: argparse.Namespace) -> dict[str, Any]:
    rounds = args.rounds or (30 if args.quick else 600)
    per_worker = args.per_worker or (1 if args.quick else 5)
    repeats = args.repeats or (5 if args.quick else 10)
    cpu_requests = args.rounds or max(rounds, 150)
    names = [t.name for t in targets[1:]]
    by_name = {t.name: t for t in targets}
    for stream in (False, True):  # warm-up: connections, caches, first-request costs
        await sequential(targets, 10, stream)

    modes: dict[str, Any] = {}
    for stream in (False, True):
        mode = "streaming" if stream else "non_streaming"
        result = await sequential(targets, rounds, stream)
        figures: dict[str, Any] = {"direct_p50_ms": _ms(statistics.median(result["direct"]))}
        for name in names:
            overhead = result[f"overhead:{name}"]
            figures[f"{name}_p50_ms"] = _ms(_percentile(overhead, 50))
            figures[f"{name}_p99_ms"] = _ms(_percentile(overhead, 99))
        # Server CPU per request, each target alone (Drupe's two targets share one process): a
        # figure that the machine's other load barely moves.
        # /proc counts CPU in 10 ms ticks: the fast targets get more requests than LiteLLM.
        cpu = {
            t.name: await cpu_per_request(
                t, rounds if t.name == "litellm" else cpu_requests, stream
            )
            for t in targets
        }
        figures.update({f"{name}_cpu_ms_per_request": _ms(cpu[name]) for name in cpu})
        figures["cpu_ms_over_direct"] = _ms(cpu["drupe"] - cpu["direct"])
        modes[mode] = figures
        print(
            f"{mode}: direct p50 {figures['direct_p50_ms']} ms; overhead p50/p99 "
            + "; ".join(
                f"{name} {figures[f'{name}_p50_ms']}/{figures[f'{name}_p99_ms']} ms"
                for name in names
            )
            + "; CPU ms per request "
            + ", ".join(f"{name} {figures[f'{name}_cpu_ms_per_request']}" for name in cpu),
            flush=True,
        )

    # Concurrency: at 1 client the interleaved rounds above; at 4 and 16, each target in turn
    # (the order rotates per repeat), overhead = the target's percentile minus direct's.
    concurrency: dict[str, Any] = {"requests_per_worker": per_worker}
    ratios_p50: list[float] = []
    ratios_p99: list[float] = []
    for level in LEVELS:
        per_level: dict[str, Any] = {}
        for stream in (False, True):
            mode = "streaming" if stream else "non_streaming"
            entry: dict[str, Any] = {}
            if level == 1:
                for name in names:
                    entry[f"{name}_p50_ms"] = modes[mode][f"{name}_p50_ms"]
                    entry[f"{name}_p99_ms"] = modes[mode][f"{name}_p99_ms"]
            else:
                samples: dict[str, list[float]] = {t.name: [] for t in targets}
                for repeat in range(repeats):
                    order = targets[repeat % len(targets) :] + targets[: repeat % len(targets)]
                    for target in order:
                        samples[target.name] += await concurrent(target, level, per_worker, stream)
                for name in names:
                    for q in (50, 99):
                        gap = _percentile(samples[name], q) - _percentile(samples["direct"], q)
                        entry[f"{name}_p{q}_ms"] = _ms(gap)
            if "litellm" in by_name:
                for q, bucket in ((50, ratios_p50), (99, ratios_p99)):
                    value = _ratio(entry[f"drupe_p{q}_ms"], entry[f"litellm_p{q}_ms"])
                    entry[f"ratio_p{q}"] = value
                    if value is not None:
                        bucket.append(value)
            per_level[mode] = entry
            print(f"{level} client(s), {mode}: {entry}", flush=True)
        concurrency[str(level)] = per_level

    summary: dict[str, Any] = {"rounds_per_mode": rounds, "modes": modes}
    summary["concurrency"] = concurrency
    worst = {
        key: max(modes[mode][f"drupe_{key}"] for mode in modes) for key in ("p50_ms", "p99_ms")
    }
    summary["overhead_p50_ms"] = worst["p50_ms"]
    summary["overhead_p99_ms"] = worst["p99_ms"]
    summary["cpu_ms_over_direct"] = max(modes[mode]["cpu_ms_over_direct"] for mode in modes)
    summary["floor_p50_ms"] = max(modes[mode]["floor_p50_ms"] for mode in modes)
    summary["floor_p99_ms"] = max(modes[mode]["floor_p99_ms"] for mode in modes)
    summary["drupe_p50_ms"] = worst["p50_ms"]
    summary["drupe_p99_ms"] = worst["p99_ms"]
    responses = [modes[mode]["drupe_responses_p50_ms"] for mode in modes]
    summary["drupe_responses_p50_ms"] = max(responses)
    summary["drupe_responses_p99_ms"] = max(m["drupe_responses_p99_ms"] for m in modes.values())
    summary["responses_vs_chat_p50"] = (
        round(max(responses) / worst["p50_ms"], 3) if worst["p50_ms"] > 0 else None
    )
    goals = {
        "overhead_p50": summary["overhead_p50_ms"] <= GOAL_P50_MS,
        "overhead_p99": summary["overhead_p99_ms"] <= GOAL_P99_MS,
        "cpu": summary["cpu_ms_over_direct"] <= GOAL_CPU_MS,
    }
    if "litellm" in by_name:
        summary["litellm_p50_ms"] = max(m["litellm_p50_ms"] for m in modes.values())
        summary["litellm_p99_ms"] = max(m["litellm_p99_ms"] for m in modes.values())
        summary["ratio_p50"] = max(ratios_p50) if ratios_p50 else None
        summary["ratio_p99"] = max(ratios_p99) if ratios_p99 else None
        summary["goal_ratio"] = GOAL_RATIO
        goals["ratio_p50"] = summary["ratio_p50"] is not None and summary["ratio_p50"] <= GOAL_RATIO
        goals["ratio_p99"] = summary["ratio_p99"] is not None and summary["ratio_p99"] <= GOAL_RATIO
    summary["goals_met"] = goals
    summary["meets_goal"] = all(goals.values())
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (<= 60 s)")
    parser.add_argument("--words", type=int, default=20, help="words in every upstream answer")
    parser.add_argument("--rounds", type=int, default=0, help="sequential rounds per mode")
    parser.add_argument(
        "--per-worker", type=int, default=0, help="requests per client at 4 and 16 clients"
    )
    parser.add_argument(
        "--no-install", action="store_true", help="do not create the LiteLLM venv if missing"
    )
    parser.add_argument("--no-litellm", action="store_true", help="measure Drupe vs direct only")
    parser.add_argument("--repeats", type=int, default=0, help="bursts per target at 4 and 16")
    parser.add_argument(
        "--agent-loop",
        action="store_true",
        help="Drupe with gateway_passthrough off: every request through the agent loop",
    )
    args = parser.parse_args()
    started = time.monotonic()
    summary = anyio.run(measure, args, backend="asyncio", backend_options={"use_uvloop": True})
    summary.setdefault("litellm_p50_ms", None)
    summary.setdefault("litellm_p99_ms", None)
    summary.setdefault("ratio_p50", None)
    summary.setdefault("ratio_p99", None)
    summary["bench"] = "gateway"
    summary["quick"] = bool(args.quick)
    summary["passthrough"] = not args.agent_loop
    summary["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
