"""Stopping the Claude Code CLI process: disconnect, then SIGTERM and SIGKILL when it lingers.

Owns: ``process_of`` (the CLI child process of a connected ``ClaudeSDKClient``) and
``disconnect`` (the SDK's disconnect, stdin EOF, with an escalation running beside it: SIGTERM
after ``grace_s``, SIGKILL after another ``grace_s``, then a last kill and a bounded wait).

Must never: raise (a failed disconnect is logged), or wait unbounded for the process.
"""

from __future__ import annotations

import logging
from contextlib import suppress

import anyio
from anyio.abc import Process
from claude_agent_sdk import ClaudeSDKClient

__all__ = ["disconnect", "process_of"]

log = logging.getLogger(__name__)


def process_of(client: ClaudeSDKClient) -> Process | None:
    """The CLI child process of a connected client (the SDK keeps it on its transport)."""
    process = getattr(getattr(client, "_transport", None), "_process", None)
    return process if isinstance(process, Process) else None


async def disconnect(client: ClaudeSDKClient, process: Process | None, grace_s: float) -> None:
    """Disconnect; escalate SIGTERM then SIGKILL when the CLI has not exited in time."""
    async with anyio.create_task_group() as tg:
        if process is not None:
            tg.start_soon(_escalate, process, grace_s)
        try:
            await client.disconnect()
        except Exception as exc:
            log.warning("claude-code disconnect failed: %s", exc)
        if process is not None and process.returncode is None:
            with anyio.move_on_after(grace_s * 2):
                await process.wait()
        tg.cancel_scope.cancel()
    if process is not None and process.returncode is None:
        with suppress(ProcessLookupError):
            process.kill()
        with anyio.move_on_after(grace_s):
            await process.wait()


async def _escalate(process: Process, grace_s: float) -> None:
    """SIGTERM after ``grace_s``, SIGKILL after another ``grace_s`` (cancelled once it exits)."""
    for signal_it in (process.terminate, process.kill):
        await anyio.sleep(grace_s)
        if process.returncode is not None:
            return
        log.warning("the Claude Code CLI did not exit in time: %s", signal_it.__name__)
        with suppress(ProcessLookupError):
            signal_it()
