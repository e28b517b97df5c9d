"""``python_exec``: run model-written Python in a child process, in a throwaway directory.

This is not a sandbox: the child runs with the server user's rights. It is therefore never offered
unless ``ToolSettings(code_execution=True)`` (see ``drupe.tools.builtins``), and by default it is
approval-gated. What it does guarantee: the child runs isolated (``python -I``) in a fresh temp
dir that is deleted afterwards, with a minimal environment (no API keys leak from the server's
environment), a wall-clock timeout after which its whole process group is killed, and bounded
captured output. It never raises for the code's own failures: those are a result with a non-zero
``exit_code``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream, Process

from drupe.errors import ToolError
from drupe.tools.base import ToolContext, ToolEntry

__all__ = ["PYTHON_EXEC", "PythonExecResult", "python_exec_entry", "run_python"]

PYTHON_EXEC = "python_exec"
_READ_CHUNK = 65_536


@dataclass(frozen=True, slots=True)
class PythonExecResult:
    """What one run produced."""

    exit_code: int | None
    """``None`` when the run was killed at the timeout."""
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool


def _child_environment(home: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


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


async def run_python(
    code: str, *, timeout_s: float = 30.0, max_output_bytes: int = 64_000
) -> PythonExecResult:
    """Run ``code`` with this interpreter in a fresh temp dir and collect its output."""
    with tempfile.TemporaryDirectory(prefix="drupe-exec-") as workdir:
        script = Path(workdir) / "main.py"
        script.write_text(code, encoding="utf-8")
        process = await anyio.open_process(
            [sys.executable, "-I", "main.py"],
            cwd=workdir,
            env=_child_environment(workdir),
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
                # Timed out or cancelled: the script and any children it started (they share
                # its process group, and may hold the output pipes open) are killed.
                _kill_group(process)
                with anyio.CancelScope(shield=True):
                    await process.wait()
            with anyio.CancelScope(shield=True):
                await process.aclose()
    return PythonExecResult(
        exit_code=None if timed_out else process.returncode,
        stdout=stdout.decode("utf-8", errors="replace"),
        stderr=stderr.decode("utf-8", errors="replace"),
        timed_out=timed_out,
        truncated=any(overflow),
    )


def python_exec_entry(*, timeout_s: float = 30.0, require_approval: bool = True) -> ToolEntry:
    """The ``python_exec`` tool; only ``drupe.tools.builtins`` should offer it."""

    async def execute(arguments: Mapping[str, Any], context: ToolContext) -> Any:
        code = arguments.get("code")
        if not isinstance(code, str) or not code.strip():
            raise ToolError("argument 'code' must be a non-empty string of Python source")
        return asdict(await run_python(code, timeout_s=timeout_s))

    return ToolEntry(
        name=PYTHON_EXEC,
        description=(
            "Run a Python 3 script in a fresh temporary directory and return its exit code, "
            f"stdout and stderr. The run is killed after {timeout_s:g} seconds. Print what you "
            "need to see."
        ),
        input_schema={
            "type": "object",
            "properties": {"code": {"type": "string", "description": "Python source to run"}},
            "required": ["code"],
        },
        execute=execute,
        namespace="builtin",
        defer="never",
        needs_approval=(lambda _arguments: True) if require_approval else None,
    )
