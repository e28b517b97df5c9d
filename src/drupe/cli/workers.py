"""``drupe serve --workers N``: N server processes on one listening socket (cluster mode).

Contract:

* The parent binds the socket (``server.listen``), imports the server's modules and forks N
  worker processes (before any event loop, thread or connection exists here, so none is
  inherited; multiprocessing's ``spawn``, a fresh interpreter, if a thread does exist) that each
  run uvicorn on the inherited socket; the kernel spreads the accepted connections between
  them. Each worker is a cluster node of its own, ``<base>-w<i>`` (i from 1; base is the
  settings' node id, else ``<host>-<parent pid>``). A worker first restores the default
  SIGINT/SIGTERM handlers (not the supervisor's, which a fork copies).
* The parent announces the URL once every worker has started. A worker that fails to start
  stops the whole server (exit status 1; the worker's own error is on stderr). A worker that
  dies after it had started is reported on stderr and started again under the same node id.
* SIGINT (Ctrl-C) or SIGTERM to the parent: every worker gets one SIGTERM and shuts down
  gracefully (its live answers are persisted by its runtime's own shutdown); a worker still
  running ``STOP_TIMEOUT`` seconds later is killed. Workers run in their own process group, so
  a terminal's Ctrl-C reaches only the parent (a second signal would make uvicorn skip the
  graceful shutdown), and a worker stops itself when the parent dies.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from multiprocessing.context import ForkContext, SpawnContext
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import Any, Final

from drupe.cli.server import run_server
from drupe.settings import Settings

__all__ = ["STOP_TIMEOUT", "run_workers", "worker_settings"]

STOP_TIMEOUT: Final = 30.0
"""Seconds a stopping worker may take (graceful HTTP shutdown plus terminal writes)."""
_POLL: Final = 0.25


def worker_settings(settings: Settings, index: int, base: str) -> Settings:
    """Worker ``index``'s settings: its own node id ``<base>-w<index>``, one process."""
    return replace(
        settings, workers=1, cluster=replace(settings.cluster, node_id=f"{base}-w{index}")
    )


@dataclass(slots=True)
class _Worker:
    index: int
    node_id: str
    process: BaseProcess
    ready: Connection
    """The parent's end of the pipe the worker says "started" on."""
    started: bool = False


def _describe(exitcode: int | None) -> str:
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        return f"killed by {signal.Signals(-exitcode).name}"
    return f"exit status {exitcode}"


def run_workers(
    settings: Settings,
    sock: socket.socket,
    *,
    announce: Callable[[], None],
    report: Callable[[str], None],
) -> int:
    """Run ``settings.workers`` servers on ``sock`` until a signal; the exit status."""
    ctx = _context()
    host = socket.gethostname().split(".")[0] or "node"
    base = settings.cluster.node_id or f"{host}-{os.getpid()}"
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}

    def start(index: int) -> _Worker:
        theirs, ours = ctx.Pipe(duplex=False)
        mine = worker_settings(settings, index, base)
        process = ctx.Process(
            target=_worker_main,
            args=(mine, sock, ours),
            name=f"drupe-worker-{index}",
        )
        process.start()
        ours.close()  # the worker holds the sending end now
        return _Worker(index, mine.cluster.node_id or "", process, theirs)

    workers: dict[int, _Worker] = {}
    status = 0
    announced = False
    try:
        for index in range(1, settings.workers + 1):
            workers[index] = start(index)
        while not stopping.is_set():
            pending: list[Any] = [w.ready for w in workers.values() if not w.started]
            wait([w.process.sentinel for w in workers.values()] + pending, timeout=_POLL)
            for worker in list(workers.values()):
                if not worker.started and worker.ready.poll():
                    with contextlib.suppress(EOFError):
                        worker.started = worker.ready.recv() == "started"
                    if worker.started and announced:
                        report(f"worker {worker.node_id} is serving again")
                if worker.process.is_alive() or stopping.is_set():
                    continue
                worker.process.join()
                worker.ready.close()
                how = _describe(worker.process.exitcode)
                if not worker.started:
                    report(f"worker {worker.node_id} failed to start ({how}); stopping")
                    status = 1
                    stopping.set()
                    break
                report(
                    f"worker {worker.node_id} (pid {worker.process.pid}) died ({how}); "
                    "starting it again"
                )
                workers[worker.index] = start(worker.index)
            if not announced and all(w.started for w in workers.values()):
                announced = True
                announce()
    finally:
        _stop(list(workers.values()))
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return status


def _context() -> ForkContext | SpawnContext:
    """``fork`` once the server's modules are imported here (each worker then starts without
    importing them again); ``spawn`` when this process runs a thread (a fork would copy it)."""

    if threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _stop(workers: list[_Worker]) -> None:
    """One SIGTERM each, then wait up to ``STOP_TIMEOUT``; kill whatever is left."""
    for worker in workers:
        if worker.process.is_alive() and worker.process.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.process.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    for worker in workers:
        worker.process.join(max(0.0, deadline - time.monotonic()))
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.ready.close()


def _stop_with_parent() -> None:
    """A worker's watch: when the supervisor is gone, stop this worker as SIGTERM would."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return
    parent.join()
    os.kill(os.getpid(), signal.SIGTERM)


def _worker_main(settings: Settings, sock: socket.socket, ready: Connection) -> None:
    """A worker process: its own process group, then one server on the inherited socket."""
    for sig in (signal.SIGINT, signal.SIGTERM):  # not the supervisor's handlers (fork)
        signal.signal(sig, signal.SIG_DFL)
    os.setpgid(0, 0)
    threading.Thread(target=_stop_with_parent, name="parent-watch", daemon=True).start()

    def on_started() -> None:
        ready.send("started")
        ready.close()

    started = run_server(settings, sock, on_started)
    sys.exit(0 if started else 1)
