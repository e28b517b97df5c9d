"""``drupe serve --workers 2`` as a real process tree on a fresh database and key prefix.

The smoke subset (healthz, models, one chat turn, the conversation list) through the one port;
both workers take requests (one is frozen with SIGSTOP, so the other must accept: then the other
way round); a worker killed with SIGKILL is reported and started again; SIGTERM to the parent
stops both workers gracefully.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.multinode import services
from tests.multinode.client import chat, text_of
from tests.multinode.harness import await_announce

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.timeout(180)]


@dataclass
class Served:
    process: subprocess.Popen[str]
    url: str
    log: Path

    def workers(self) -> list[int]:
        """The worker processes' pids (the children that run a server, not a helper such as
        multiprocessing's resource tracker)."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        pids = [int(p) for p in children.read_text().split()]
        return [p for p in pids if b"resource_tracker" not in _cmdline(p)]

    def node(self) -> str:
        """The node id of the worker that answers a request on a new connection."""
        return str(httpx.get(f"{self.url}/api/status", timeout=20).json()["node"]["id"])


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return b"resource_tracker"  # gone: not a worker


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    work = tmp_path_factory.mktemp("workers")
    (work / "config.toml").write_text(services.DEFAULT_CONFIG)
    database, prefix = services.new_database(), f"drupe-mn-{uuid.uuid4().hex[:10]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRUPE_")}
    env |= {
        "PYTHONUNBUFFERED": "1",
        "DRUPE_REDIS_PREFIX": prefix,
        "DRUPE_NODE_ID": "wt",
        "DRUPE_WORKERS": "2",
    }
    log = work / "serve.log"
    with log.open("a") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "drupe", "serve", "--port", "0", "--data-dir", str(work),
             "--no-auth", "--config", str(work / "config.toml"), "--database-url", database,
             "--redis-url", services.redis_url()],
            stdout=subprocess.PIPE, stderr=stderr, text=True, env=env,
        )  # fmt: skip
    try:
        yield Served(process, await_announce(process, log, "drupe serve --workers 2"), log)
    finally:
        if process.poll() is None:
            process.kill()  # a test failed before the graceful stop: take the workers too
            for pid in Served(process, "", log).workers():
                os.kill(pid, signal.SIGKILL)
        process.wait(timeout=30)
        services.drop_database(database)
        services.delete_keys(prefix)


def test_two_workers_serve_the_smoke_subset(served: Served) -> None:
    assert httpx.get(f"{served.url}/healthz", timeout=20).json() == {"status": "ok"}
    models = httpx.get(f"{served.url}/api/models", timeout=20).json()
    assert "scripted:echo" in str(models)
    chunks = chat(served.url, "c-workers", "hello workers")
    assert "".join(c["delta"] for c in chunks if c["type"] == "text-delta") == (
        "You said: hello workers"
    )
    listed = httpx.get(f"{served.url}/api/conversations", timeout=20).json()["items"]
    assert [c["id"] for c in listed] == ["c-workers"]
    detail = httpx.get(f"{served.url}/api/conversations/c-workers", timeout=20).json()
    assert [(m["role"], text_of(m)) for m in detail["messages"]] == [
        ("user", "hello workers"),
        ("assistant", "You said: hello workers"),
    ]


def test_both_workers_take_requests(served: Served) -> None:
    first, second = served.workers()
    answered = []
    for frozen in (first, second):
        os.kill(frozen, signal.SIGSTOP)  # it cannot accept: the other worker must
        try:
            answered.append(served.node())
        finally:
            os.kill(frozen, signal.SIGCONT)
    assert sorted(answered) == ["wt-w1", "wt-w2"]


def test_a_killed_worker_is_reported_and_started_again(served: Served) -> None:
    victim = served.workers()[0]
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while "is serving again" not in served.log.read_text():
        assert time.monotonic() < deadline, served.log.read_text()[-3000:]
        time.sleep(0.1)  # polled: the restarted worker boots in a few seconds
    assert "died (killed by SIGKILL); starting it again" in served.log.read_text()
    assert victim not in served.workers() and len(served.workers()) == 2
    answered = set()
    for frozen in served.workers():
        os.kill(frozen, signal.SIGSTOP)
        try:
            answered.add(served.node())
        finally:
            os.kill(frozen, signal.SIGCONT)
    assert answered == {"wt-w1", "wt-w2"}


def test_sigterm_stops_every_worker_gracefully(served: Served) -> None:
    workers = served.workers()
    served.process.send_signal(signal.SIGTERM)
    assert served.process.wait(timeout=60) == 0
    log = served.log.read_text()
    assert log.count("Application shutdown complete") >= 2
    assert all(not Path(f"/proc/{pid}").exists() for pid in workers)
