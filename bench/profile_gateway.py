"""Profile Drupe's gateway serving chat completions: where one request's CPU time goes.

Method (the one behind the gateway rows of ``bench/README.md``): the fake OpenAI upstream runs
in its own process, Drupe (``create_app_with_lifespan``, an ``openai-compatible`` provider
``fake``) runs under uvicorn in THIS process with ``cProfile`` enabled only while a separate
client process sends ``--requests`` requests one at a time, so the profile holds the server's
work and nothing of the client's. The profiler's clock is the process CPU time (waiting in
``epoll`` counts for nothing). The report lists the self time per package (the profiler's
own overhead inflates every figure about 2-3x; the shares are what matter), then the top
functions by cumulative and by self time.

    python bench/profile_gateway.py                   # non-streaming, 300 requests
    python bench/profile_gateway.py --stream          # streaming
    python bench/profile_gateway.py --agent-loop      # DRUPE_GATEWAY_PASSTHROUGH=off: the loop
    python bench/profile_gateway.py --out prof.out    # also keep the pstats file

The last line is one JSON object: ``requests``, ``stream``, ``passthrough``,
``server_cpu_ms_per_request`` (profiled, so inflated) and ``top_packages`` (share of self time).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import anyio
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gateway import _free_port

_CLIENT = """
import sys, time, httpx
url, key, n, stream = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
body = {"model": "fake:fake", "messages": [{"role": "user", "content": "Say something."}],
        "stream": stream}
with httpx.Client(base_url=url, headers={"authorization": f"Bearer {key}"}, timeout=30) as c:
    for _ in range(n):
        with c.stream("POST", "/chat/completions", json=body) as r:
            for _ in r.iter_raw():
                pass
            assert r.status_code == 200, r.status_code
"""


def _package(filename: str, function: str) -> str:
    site = re.search(r"site-packages/([^/]+)", filename)
    if site:
        return site.group(1).removesuffix(".py")
    if "/src/drupe/" in filename:
        return "drupe." + filename.split("/src/drupe/")[1].split("/")[0].removesuffix(".py")
    if filename.startswith("~"):
        return "builtin " + function.split(" of ")[0].strip("<>")[:30]
    return "stdlib " + filename.rsplit("/", 1)[-1]


def by_package(stats: pstats.Stats) -> list[tuple[str, float]]:
    totals: Counter[str] = Counter()
    for (filename, _, function), row in stats.stats.items():  # type: ignore[attr-defined]
        totals[_package(filename, function)] += row[2]
    whole = sum(totals.values()) or 1.0
    return [(name, round(100 * value / whole, 1)) for name, value in totals.most_common(25)]


async def profile(args: argparse.Namespace, upstream_port: int) -> cProfile.Profile:
    from drupe.api.app_factory import create_app_with_lifespan
    from drupe.persistence.db import open_database
    from drupe.settings import AuthSettings, Settings

    workdir = Path(tempfile.mkdtemp(prefix="drupe-profile-gateway-"))
    drupe_port = _free_port()
    config = workdir / "config.toml"
    config.write_text(
        f'[providers.fake]\ntype = "openai-compatible"\n'
        f'base_url = "http://127.0.0.1:{upstream_port}/v1"\nmodels = ["fake"]\n'
    )
    async with open_database(None, data_dir=workdir) as db:
        key, _ = await db.api_keys.create("profile")
    settings = Settings(
        data_dir=workdir,
        config_path=config,
        gateway_passthrough=not args.agent_loop,
        auth=AuthSettings(enabled=False),
    )
    app = create_app_with_lifespan(settings)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=drupe_port, log_level="warning")
    )
    client = [sys.executable, "-c", _CLIENT, f"http://127.0.0.1:{drupe_port}/v1", key]
    flag = "1" if args.stream else "0"
    profiler = cProfile.Profile(time.process_time)  # CPU time: waits do not count
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        for _ in range(100):  # the server and the upstream are starting: poll
            warm = await anyio.run_process(
                [*client, "20", flag], check=False, stderr=subprocess.DEVNULL
            )
            if warm.returncode == 0:
                break
            await anyio.sleep(0.3)
        profiler.enable()
        run = await anyio.run_process([*client, str(args.requests), flag], check=False)
        profiler.disable()
        server.should_exit = True
    shutil.rmtree(workdir, ignore_errors=True)
    if run.returncode != 0:
        raise RuntimeError(f"the client failed: {run.stderr.decode(errors='replace')[-800:]}")
    return profiler


def report(profiler: cProfile.Profile, args: argparse.Namespace) -> dict[str, object]:
    cpu = pstats.Stats(profiler).total_tt  # type: ignore[attr-defined]
    stats = pstats.Stats(profiler)
    if args.out:
        stats.dump_stats(args.out)
    packages = by_package(stats)
    print("self time by package (%):")
    for name, share in packages:
        print(f"  {share:5.1f}  {name}")
    stats.sort_stats("cumulative").print_stats(args.top)
    stats.sort_stats("tottime").print_stats(args.top)
    return {
        "requests": args.requests,
        "stream": args.stream,
        "passthrough": not args.agent_loop,
        "server_cpu_ms_per_request": round(float(cpu) / args.requests * 1000, 3),
        "top_packages": dict(packages[:10]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--agent-loop", action="store_true", help="pass-through off")
    parser.add_argument("--top", type=int, default=30, help="functions listed per table")
    parser.add_argument("--out", default="", help="write the pstats file here")
    args = parser.parse_args()
    upstream_port = _free_port()
    upstream = subprocess.Popen(
        [
            *(sys.executable, "-m", "drupe.testing.fake_providers", "openai"),
            *("--port", str(upstream_port), "--words", "20"),
        ]
    )
    try:
        # uvloop: the loop uvicorn[standard] serves on
        profiler = anyio.run(
            profile, args, upstream_port, backend="asyncio", backend_options={"use_uvloop": True}
        )
    finally:
        upstream.terminate()
        upstream.wait()
    summary = report(profiler, args)
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
