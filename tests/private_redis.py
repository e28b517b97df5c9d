"""A private ``redis-server`` on its own port, started and killed by a test (a restart, a
snapshot, a configuration of its own), so the shared Redis of the other tests is untouched."""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.multinode.harness import free_port


class PrivateRedis:
    """``redis-server`` without persistence (``SAVE`` still writes its snapshot to
    ``directory``, which a restart loads); ``options``: more of its command-line options."""

    def __init__(self, port: int, directory: Path, *options: str) -> None:
        self.port = port
        self.directory = directory
        self.options = options
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed (apt-get install redis-server)")
        self.process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
                *self.options,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(200):
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            subprocess.run(["sleep", "0.02"], check=True)
        pytest.fail("the private redis-server did not start")

    def stop(self) -> None:
        """Kill it (``SIGKILL``: no save at shutdown)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    # A port below the ephemeral range: while Redis is down, the nodes' reconnects must not be
    # able to take its port as their local port (or connect to themselves on it).
    server = PrivateRedis(free_port(), tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()
