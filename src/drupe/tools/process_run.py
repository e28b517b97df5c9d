"""``run_bounded``: run a child process with a time limit and capped output.

The one place Drupe runs code for a model (``python_exec``, the in-process agent's ``shell``).
Contract: the child starts in a new session with stdin closed and the given environment only;
stdout and stderr are read concurrently, each kept up to ``max_output_bytes``; at the timeout, or
when the caller is cancelled, the child's whole process group is killed (children may hold the
pipes open) and reaped, shielded. This is a time and output bound, NOT a sandbox: the child has
the server user's rights.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, Process

__all__ = ["ProcessOutcome", "run_bounded"]


@dataclass(frozen=True, slots=True)
class ProcessOutcome:
    """What one bounded run produced."""

    exit_code: int | None
    """``None`` when the run was killed at the timeout."""
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool


async def _drain(stream: ByteReceiveStream | None, sink: bytearray, cap: int) -> bool:
    """Read ``stream`` to its end, keeping at most ``cap`` bytes; return whether it overflowed."""
    if stream is None:
        return False
    overflow = False
    async for chunk in stream:
        room = cap - len(sink)
        if len(chunk) > room:
            overflow = True
        sink.extend(chunk[: max(room, 0)])
    return overflow


def _kill_group(process: Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except PermissionError:
        process.kill()


async def run_bounded(
    command: Sequence[str],
    *,
    cwd: Path | str,
    env: Mapping[str, str],
    timeout_s: float,
    max_output_bytes: int,
) -> ProcessOutcome:
    """Run ``command``; see the module contract."""
    process = await anyio.open_process(
        list(command),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    stdout, stderr = bytearray(), bytearray()
    overflow: list[bool] = []
    timed_out = False
    try:
        with anyio.move_on_after(timeout_s) as scope:
            async with anyio.create_task_group() as tg:

                async def collect(stream: ByteReceiveStream | None, sink: bytearray) -> None:
                    overflow.append(await _drain(stream, sink, max_output_bytes))

                tg.start_soon(collect, process.stdout, stdout)
                tg.start_soon(collect, process.stderr, stderr)
                await process.wait()
        timed_out = scope.cancelled_caught
    finally:
        if timed_out or process.returncode is None:
            # Timed out or cancelled: the child and anything it started are killed.
            _kill_group(process)
            with anyio.CancelScope(shield=True):
                await process.wait()
        with anyio.CancelScope(shield=True):
            await process.aclose()
    return ProcessOutcome(
        exit_code=None if timed_out else process.returncode,
        stdout=stdout.decode("utf-8", errors="replace"),
        stderr=stderr.decode("utf-8", errors="replace"),
        timed_out=timed_out,
        truncated=any(overflow),
    )
