"""python_exec: a child interpreter in a temp dir, bounded by a timeout and an output cap."""

from __future__ import annotations

import os

import pytest

from drupe.errors import ToolError
from drupe.tools.base import ToolContext
from drupe.tools.code_exec import python_exec_entry, run_python


async def test_runs_code_in_a_fresh_directory_without_the_server_environment() -> None:
    os.environ["DRUPE_TEST_SECRET"] = "sk-should-not-leak"
    try:
        result = await run_python(
            "import os, sys\n"
            "print(sorted(os.listdir('.')))\n"
            "print(os.environ.get('DRUPE_TEST_SECRET'))\n"
            "print('oops', file=sys.stderr)\n"
            "sys.exit(3)\n"
        )
    finally:
        del os.environ["DRUPE_TEST_SECRET"]
    assert result.exit_code == 3
    assert result.stdout.splitlines() == ["['main.py']", "None"]
    assert result.stderr.strip() == "oops"
    assert not result.timed_out and not result.truncated


async def test_timeout_kills_the_run() -> None:
    result = await run_python(
        "import time\nprint('started', flush=True)\ntime.sleep(60)\n", timeout_s=0.5
    )
    assert result.timed_out
    assert result.exit_code is None
    assert result.stdout == "started\n"


async def test_output_is_capped() -> None:
    result = await run_python("print('x' * 100_000)", max_output_bytes=1_000)
    assert result.truncated
    assert len(result.stdout) == 1_000
    assert result.exit_code == 0


async def test_entry_executes_and_validates() -> None:
    entry = python_exec_entry(require_approval=False)
    context = ToolContext(conversation_id="c", tool_call_id="t")
    out = await entry.execute({"code": "print(6 * 7)"}, context)
    assert out["stdout"] == "42\n" and out["exit_code"] == 0
    with pytest.raises(ToolError):
        await entry.execute({"code": ""}, context)


async def test_a_background_child_holding_the_pipe_is_killed_at_the_timeout() -> None:
    code = (
        "import subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print('parent done', flush=True)\n"
    )
    result = await run_python(code, timeout_s=0.5)
    # The parent exited at once, but its child kept stdout open until the timeout killed it.
    assert result.timed_out
    assert result.stdout == "parent done\n"
