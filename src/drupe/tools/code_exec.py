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
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from drupe.errors import ToolError
from drupe.tools.base import ToolContext, ToolEntry
from drupe.tools.process_run import run_bounded

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


async def run_python(
    code: str, *, timeout_s: float = 30.0, max_output_bytes: int = 64_000
) -> PythonExecResult:
    """Run ``code`` with this interpreter in a fresh temp dir and collect its output."""
    with tempfile.TemporaryDirectory(prefix="drupe-exec-") as workdir:
        script = Path(workdir) / "main.py"
        script.write_text(code, encoding="utf-8")
        outcome = await run_bounded(
            [sys.executable, "-I", "main.py"],
            cwd=workdir,
            env=_child_environment(workdir),
            timeout_s=timeout_s,
            max_output_bytes=max_output_bytes,
        )
    return PythonExecResult(**asdict(outcome))


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
