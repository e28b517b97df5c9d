"""P7: how long `drupe serve` takes, from the process start, to answer ``/healthz`` with 200.

Each run starts ``drupe serve --port 0`` on the embedded defaults (SQLite in a fresh data dir,
no provider configured) as a child process, reads the URL it prints, and polls ``/healthz``
until it answers 200. Runs alternate between a cold data dir (the first boot creates and
migrates the database) and a warm one (a restart: the database exists). The figure is the
median over the runs.

Baselines, measured in the same run so that a loaded machine moves both:

* ``floor_s``: a bare uvicorn + FastAPI process with one ``/healthz`` route, the least any
  FastAPI server on this machine can do;
* ``python_s``: ``python -c pass``, the interpreter's own start.

Besides wall time (noisy on a shared machine) it reports the CPU seconds the child used until
its first 200 (``cpu_s``, from ``/proc/<pid>/stat``), which a loaded machine moves far less.

Drupe's bytecode is compiled first (``compileall``, as ``pip install`` does for an installed
package): an editable checkout run with ``PYTHONDONTWRITEBYTECODE=1`` would otherwise compile
every Drupe module from source on every boot (about 0.15 s of CPU a boot).

    .venv/bin/python bench/boot.py --quick     # 3 runs of each; full: 5
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import emit

_URL = re.compile(rb"http://[0-9.:\[\]a-z]+:\d+")
_TICKS = os.sysconf("SC_CLK_TCK")

_FLOOR_APP = """
import socket, sys
import uvicorn
from fastapi import FastAPI
app = FastAPI()
@app.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}
sock = socket.socket(); sock.bind(("127.0.0.1", 0)); sock.listen(128)
print(f"http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
"""


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime + stime


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _boot(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Start ``argv``; return (wall seconds to the first 200 on /healthz, child CPU seconds)."""
    started = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        assert child.stdout is not None
        url = None
        while url is None:
            line = child.stdout.readline()
            if not line:
                raise RuntimeError(f"{argv[0]} exited before printing its URL")
            match = _URL.search(line)
            url = match.group(0).decode() if match else None
        while not _healthy(url):
            if child.poll() is not None:
                raise RuntimeError(f"{argv[0]} exited before /healthz answered")
            time.sleep(0.005)
        wall = time.perf_counter() - started
        return wall, _cpu_seconds(child.pid)
    finally:
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _compile_drupe() -> None:
    spec = importlib.util.find_spec("drupe")
    for location in (spec.submodule_search_locations or []) if spec else []:
        compileall.compile_dir(location, quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="3 runs of each instead of 5")
    parser.add_argument("--runs", type=int, default=None)
    args = parser.parse_args()
    runs = args.runs or (3 if args.quick else 5)
    drupe = str(Path(sys.executable).with_name("drupe"))
    _compile_drupe()
    walls: dict[str, list[float]] = {"cold": [], "warm": [], "floor": [], "python": []}
    cpus: dict[str, list[float]] = {"cold": [], "warm": [], "floor": []}
    with tempfile.TemporaryDirectory(prefix="drupe-boot-") as tmp:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.endswith("_API_KEY") and not k.startswith("DRUPE_")
        }
        env["HOME"] = tmp  # no user config: the embedded defaults
        env["XDG_CONFIG_HOME"] = str(Path(tmp) / "config")
        warm_dir = Path(tmp) / "warm"
        _boot(
            [drupe, "serve", "--no-auth", "--port", "0", "--data-dir", str(warm_dir)], env
        )  # create it
        for i in range(runs):
            cold_dir = Path(tmp) / f"cold-{i}"
            for kind, argv in (
                ("cold", [drupe, "serve", "--no-auth", "--port", "0", "--data-dir", str(cold_dir)]),
                ("warm", [drupe, "serve", "--no-auth", "--port", "0", "--data-dir", str(warm_dir)]),
                ("floor", [sys.executable, "-c", _FLOOR_APP]),
            ):
                wall, cpu = _boot(argv, env)
                walls[kind].append(wall)
                cpus[kind].append(cpu)
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
            walls["python"].append(time.perf_counter() - started)

    figures: dict[str, object] = {
        "bench": "boot",
        "runs": runs,
        "boot_s": round(statistics.median(walls["warm"]), 3),
        "cold_boot_s": round(statistics.median(walls["cold"]), 3),
        "cpu_s": round(statistics.median(cpus["warm"]), 3),
        "cold_cpu_s": round(statistics.median(cpus["cold"]), 3),
        "floor_s": round(statistics.median(walls["floor"]), 3),
        "floor_cpu_s": round(statistics.median(cpus["floor"]), 3),
        "python_s": round(statistics.median(walls["python"]), 3),
    }
    figures["ratio_vs_floor"] = round(
        statistics.median(walls["warm"]) / statistics.median(walls["floor"]), 2
    )
    figures["cpu_ratio_vs_floor"] = round(
        statistics.median(cpus["warm"]) / statistics.median(cpus["floor"]), 2
    )
    figures["goal_s"] = 1.5
    print(
        f"drupe serve -> /healthz: {figures['boot_s']} s warm, {figures['cold_boot_s']} s cold"
        f" (CPU {figures['cpu_s']} / {figures['cold_cpu_s']} s); bare FastAPI"
        f" {figures['floor_s']} s (CPU {figures['floor_cpu_s']} s); python -c pass"
        f" {figures['python_s']} s"
    )
    emit(figures)


if __name__ == "__main__":
    main()
