"""A real Drupe cluster for tests: N ``drupe serve`` processes and an HAProxy balancer in front.

``Cluster`` starts N nodes (``python -m drupe serve``) in cluster mode on one PostgreSQL
database and one Redis key prefix, each on its own loopback port with its own data dir, and
HAProxy (Debian's ``haproxy`` binary; config rendered from ``deploy/haproxy.cfg``, the template
``scripts/cluster`` uses) round-robin in front of them, with no sticky routing. The nodes boot
in parallel; ``start()`` returns when every node has announced its URL (the app has started and
the socket accepts requests) and the balancer answers ``/healthz``.

Controls, all on one ``Node`` (``cluster.nodes[i]``, or ``cluster.node("node-2")``):
``kill9`` (SIGKILL), ``sigstop`` / ``sigcont`` (freeze and thaw, the lease stops being renewed),
``stop`` (SIGINT: graceful, the node persists its partials), ``start_node`` / ``restart`` (a new
process on the same port, data dir and node id; waits until it serves) and ``wait_healthy``.
``backend_state()`` reads HAProxy's view of the nodes (``{"node-1": "UP", ...}``) and
``wait_backend(node, "UP"|"DOWN")`` waits for it, through HAProxy's admin socket.

Nothing here asserts anything about Drupe: it only runs the parts. Node logs (stderr, and stdout
after the announce: uvicorn's access log, drained by a thread so the pipe never fills) are in
``<work_dir>/<name>.log``; ``log(node)`` returns one, and a failed start raises with its tail.
"""

from __future__ import annotations

import os
import random
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final

import httpx

__all__ = [
    "BOOT_TIMEOUT",
    "HAPROXY_TEMPLATE",
    "Cluster",
    "Node",
    "await_announce",
    "free_port",
    "render_haproxy",
]

REPO: Final = Path(__file__).resolve().parents[2]
HAPROXY_TEMPLATE: Final = REPO / "deploy" / "haproxy.cfg"
BOOT_TIMEOUT: Final = 60.0
"""Seconds a node may take to boot (a loaded 2-core CI machine boots three in ~5 s)."""
STOP_TIMEOUT: Final = 30.0
HAPROXY_INSTALL: Final = "apt-get install -y haproxy"


def _ephemeral_floor() -> int:
    try:
        low = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0]
        return int(low)
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A loopback port free right now (the node binds it a moment later), chosen BELOW the
    kernel's ephemeral range: a port from that range can be taken in the meantime as the local
    port of any outbound connection (a bench opens thousands), and the node's bind then fails."""
    floor = _ephemeral_floor()
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(max(1024, floor - 12_000), floor)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:  # no luck below the range: let the kernel pick
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def render_haproxy(template: str, *, bind: str, servers: Sequence[tuple[str, str]]) -> str:
    """``deploy/haproxy.cfg`` with ``__BIND__`` and the ``__SERVERS__`` line filled in (comment
    lines are left as they are)."""
    lines = [f"    server {name} {address} check" for name, address in servers]
    out: list[str] = []
    for line in template.splitlines():
        if line.lstrip().startswith("#"):
            out.append(line)
        elif line.strip() == "__SERVERS__":
            out.extend(lines)
        else:
            out.append(line.replace("__BIND__", bind))
    return "\n".join(out) + "\n"


@dataclass(eq=False)
class Node:
    """One ``drupe serve`` process of the cluster (a fixed port across restarts)."""

    name: str
    """``node-1``, ``node-2``, ...: also its ``DRUPE_NODE_ID`` and its HAProxy server name."""
    port: int
    data_dir: Path
    log_path: Path
    env: dict[str, str]
    process: subprocess.Popen[str] | None = None

    @property
    def node_id(self) -> str:
        return self.name

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None, f"{self.name} is not running"
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass(eq=False)
class Cluster:
    """N nodes on ``database_url`` + ``redis_url``/``prefix`` and a balancer; see the module."""

    database_url: str
    redis_url: str
    prefix: str
    work_dir: Path
    config: Path
    """The model/provider TOML every node reads (``DRUPE_CONFIG``)."""
    size: int = 3
    balancer: bool = True
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra ``DRUPE_*`` settings for every node (e.g. ``DRUPE_LEASE_TTL``)."""
    nodes: list[Node] = field(default_factory=list)
    balancer_port: int = 0
    _haproxy: subprocess.Popen[str] | None = None

    @property
    def balancer_url(self) -> str:
        assert self.balancer, "this cluster has no balancer"
        return f"http://127.0.0.1:{self.balancer_port}"

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    def node(self, name: str) -> Node:
        return next(node for node in self.nodes if node.name == name)

    # -- lifetime ---------------------------------------------------------------------------

    def start(self) -> Cluster:
        """Boot every node in parallel, then the balancer; returns when all of them serve."""
        base = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith("DRUPE_") or key.startswith("DRUPE_TEST_")
        }
        for i in range(1, self.size + 1):
            name = f"node-{i}"
            data_dir = self.work_dir / name
            data_dir.mkdir(parents=True, exist_ok=True)
            env = {
                **base,
                "PYTHONUNBUFFERED": "1",
                "DRUPE_DATABASE_URL": self.database_url,
                "DRUPE_REDIS_URL": self.redis_url,
                "DRUPE_REDIS_PREFIX": self.prefix,
                "DRUPE_NODE_ID": name,
                "DRUPE_DATA_DIR": str(data_dir),
                "DRUPE_CONFIG": str(self.config),
                "DRUPE_AUTH": "off",  # --no-auth on loopback: the cluster is tested, not sign-in
                **self.env,
            }
            node = Node(name, free_port(), data_dir, self.work_dir / f"{name}.log", env)
            self.nodes.append(node)
        for node in self.nodes:
            self._spawn(node)
        for node in self.nodes:
            self._await_announce(node)
        if self.balancer:
            self._start_haproxy()
        return self

    def close(self) -> None:
        """Stop the balancer and every node (SIGINT, graceful; SIGKILL after a timeout)."""
        if self._haproxy is not None and self._haproxy.poll() is None:
            self._haproxy.terminate()
            try:
                self._haproxy.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._haproxy.kill()
                self._haproxy.wait()
        for node in self.nodes:
            if node.alive:
                self.sigcont(node)  # a frozen node cannot handle its SIGINT
                assert node.process is not None
                node.process.send_signal(signal.SIGINT)
        for node in self.nodes:
            if node.process is not None:
                _reap(node.process)

    # -- node controls ----------------------------------------------------------------------

    def kill9(self, node: Node) -> None:
        """SIGKILL, and wait until the process is gone (no shutdown work at all)."""
        assert node.process is not None
        node.process.kill()
        node.process.wait(timeout=STOP_TIMEOUT)

    def sigstop(self, node: Node) -> None:
        """Freeze the process (it keeps its sockets; nothing it owns moves on)."""
        os.kill(node.pid, signal.SIGSTOP)

    def sigcont(self, node: Node) -> None:
        os.kill(node.pid, signal.SIGCONT)

    def stop(self, node: Node) -> int:
        """SIGINT (graceful shutdown, partial answers persisted); its exit status."""
        assert node.process is not None
        node.process.send_signal(signal.SIGINT)
        return _reap(node.process)

    def start_node(self, node: Node) -> None:
        """Start a stopped or killed node again (same port, data dir and node id)."""
        assert not node.alive, f"{node.name} is running"
        self._spawn(node)
        self._await_announce(node)

    def restart(self, node: Node) -> None:
        """SIGKILL when still running, then ``start_node``."""
        if node.alive:
            self.kill9(node)
        self.start_node(node)

    def wait_healthy(self, node: Node, timeout: float = BOOT_TIMEOUT) -> None:
        """Wait until ``GET /healthz`` on the node answers 200."""
        _wait_until(lambda: _healthy(node.url), timeout, f"{node.name} /healthz")

    def log(self, node: Node) -> str:
        return node.log_path.read_text(errors="replace") if node.log_path.exists() else ""

    # -- balancer ---------------------------------------------------------------------------

    def backend_state(self) -> dict[str, str]:
        """HAProxy's view of each node: ``UP``, ``DOWN``, ``MAINT``, ... (from ``show stat``)."""
        out: dict[str, str] = {}
        for row in self._admin("show stat").splitlines():
            cells = row.split(",")
            if len(cells) > 17 and cells[0] == "drupe_nodes" and cells[1].startswith("node-"):
                out[cells[1]] = cells[17].split(" ")[0]
        return out

    def wait_backend(self, node: Node, state: str, timeout: float = 20.0) -> None:
        """Wait until HAProxy sees ``node`` in ``state`` (``UP`` / ``DOWN``)."""
        _wait_until(
            lambda: self.backend_state().get(node.name) == state,
            timeout,
            f"HAProxy to see {node.name} {state}",
        )

    # -- internals --------------------------------------------------------------------------

    def _spawn(self, node: Node) -> None:
        with node.log_path.open("a") as log:
            node.process = subprocess.Popen(
                [sys.executable, "-m", "drupe", "serve", "--port", str(node.port)],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env=node.env,
                cwd=self.work_dir,
            )

    def _await_announce(self, node: Node) -> None:
        assert node.process is not None
        await_announce(node.process, node.log_path, node.name)

    def _start_haproxy(self) -> None:
        binary = shutil.which("haproxy") or (
            "/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None
        )
        if binary is None:
            raise RuntimeError(
                f"HAProxy is missing (the multi-node tests need it); run: {HAPROXY_INSTALL}"
            )
        self.balancer_port = free_port()
        servers = [(node.name, f"127.0.0.1:{node.port}") for node in self.nodes]
        config = render_haproxy(
            HAPROXY_TEMPLATE.read_text(), bind=f"127.0.0.1:{self.balancer_port}", servers=servers
        )
        config += f"\nglobal\n    stats socket {self._admin_path} mode 600 level admin\n"
        path = self.work_dir / "haproxy.cfg"
        path.write_text(config)
        check = subprocess.run(
            [binary, "-c", "-q", "-f", str(path)], capture_output=True, text=True
        )
        if check.returncode != 0:
            raise RuntimeError(f"HAProxy rejected {path}:\n{check.stdout}{check.stderr}")
        with (self.work_dir / "haproxy.log").open("a") as log:
            self._haproxy = subprocess.Popen(
                [binary, "-db", "-f", str(path)], stdout=log, stderr=log, text=True
            )
        haproxy = self._haproxy

        def serving() -> bool:
            if haproxy.poll() is not None:
                log = (self.work_dir / "haproxy.log").read_text(errors="replace")
                raise RuntimeError(f"HAProxy exited ({haproxy.returncode}):\n{log[-3000:]}")
            return _healthy(self.balancer_url) and set(self.backend_state().values()) == {"UP"}

        _wait_until(
            serving,
            BOOT_TIMEOUT,
            "HAProxy to serve with every node up",
        )

    @property
    def _admin_path(self) -> Path:
        return self.work_dir / "haproxy.sock"

    def _admin(self, command: str) -> str:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(self._admin_path))
            sock.sendall(command.encode() + b"\n")
            chunks = []
            while data := sock.recv(65536):
                chunks.append(data)
        return b"".join(chunks).decode()


def await_announce(
    process: subprocess.Popen[str], log_path: Path, name: str, timeout: float = BOOT_TIMEOUT
) -> str:
    """Block until ``drupe serve`` prints ``... Open http://...`` (its app has started); the URL.

    Raises with the tail of its log when it exits or does not announce within ``timeout``."""
    assert process.stdout is not None
    stdout = process.stdout

    def tail() -> str:
        return log_path.read_text(errors="replace")[-3000:] if log_path.exists() else ""

    with selectors.DefaultSelector() as selector:
        selector.register(stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                raise RuntimeError(f"{name} did not boot within {timeout} s:\n{tail()}")
            line = stdout.readline()
            if "Open http://" in line:
                _drain(stdout, log_path)
                return line.split("Open ", 1)[1].strip()
            if not line:
                raise RuntimeError(f"{name} exited ({process.wait()}):\n{tail()}")


def _drain(stdout: IO[str], log_path: Path) -> None:
    """Copy the rest of a server's stdout (uvicorn's access log) into its log, in a thread.

    Nobody else reads the pipe after the announce: undrained, it fills after ~1,000 requests
    (64 KiB) and the server blocks in its next ``print``."""

    def copy() -> None:
        try:
            with log_path.open("a") as log:
                for line in stdout:
                    log.write(line)
                    log.flush()
        except (OSError, ValueError):  # the pipe was closed by ``_reap``
            pass

    threading.Thread(target=copy, name=f"drain {log_path.name}", daemon=True).start()


def _reap(process: subprocess.Popen[str]) -> int:
    try:
        return process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()
    finally:
        if process.stdout is not None:
            process.stdout.close()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except (httpx.HTTPError, OSError):
        return False


def _wait_until(check: object, timeout: float, what: str) -> None:
    """Poll ``check()`` every 50 ms until it is true (a wait for a state, not a fixed delay)."""
    assert callable(check)
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)
