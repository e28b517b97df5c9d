"""The heartbeat: a per-agent schedule whose prompt is ``heartbeat.md`` in the agent's workspace.

A heartbeat schedule (``kind = 'heartbeat'``, one per agent, name ``heartbeat_<agentId>``) stores
no prompt of its own (its row holds ``HEARTBEAT_PROMPT``, a placeholder). At each fire
``heartbeat_prompt`` reads the file and builds the prompt, or returns the reason the run is
skipped (each skip is recorded as a ``skipped`` run):

* ``Skipped (capability)``: the agent's driver does not run headless turns;
* ``Skipped (workspace missing)``: the agent has no workspace, or it is not a directory;
* ``Skipped (no file)``: ``heartbeat.md`` is missing, not a regular file, a symlink, or holds
  nothing but whitespace and HTML comments (an unterminated comment counts as empty).

The file is opened with ``O_NOFOLLOW`` (a symlink is refused) and read up to 64 KiB.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = [
    "HEARTBEAT_FILE",
    "HEARTBEAT_PROMPT",
    "HeartbeatPrompt",
    "HeartbeatSkip",
    "build_prompt",
    "heartbeat_prompt",
    "heartbeat_schedule_name",
    "read_heartbeat_file",
]

HEARTBEAT_FILE: Final = "heartbeat.md"
HEARTBEAT_PROMPT: Final = "(read from heartbeat.md at each fire)"
_MAX_BYTES: Final = 64 * 1024
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


@dataclass(frozen=True, slots=True)
class HeartbeatPrompt:
    prompt: str


@dataclass(frozen=True, slots=True)
class HeartbeatSkip:
    reason: str
    """The run's recorded result, e.g. ``Skipped (no file)``."""


def heartbeat_schedule_name(agent_id: str) -> str:
    return f"heartbeat_{agent_id}"


def read_heartbeat_file(workspace: Path) -> str | None:
    """The file's meaningful content (trimmed), or None when missing, unsafe or empty."""
    path = workspace / HEARTBEAT_FILE
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None  # missing, a symlink (ELOOP), unreadable
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, _MAX_BYTES)
    finally:
        os.close(fd)
    text = data.decode("utf-8", errors="replace").strip()
    without = _COMMENT.sub("", text)
    if "<!--" in without:
        without = without[: without.index("<!--")]  # an unterminated comment runs to the end
    return text if without.strip() else None


def build_prompt(content: str) -> str:
    return "\n".join(
        (
            "[Heartbeat]",
            "This is a periodic heartbeat. The instructions below are from your heartbeat.md file.",
            "Process each item and take action where possible; your answer is delivered to the "
            "chats subscribed to this heartbeat.",
            "",
            "---",
            content,
        )
    )


def heartbeat_prompt(
    workspace: str | None, *, headless_capable: bool
) -> HeartbeatPrompt | HeartbeatSkip:
    """The prompt of a heartbeat fire, or why it is skipped."""
    if not headless_capable:
        return HeartbeatSkip("Skipped (capability)")
    if not workspace or not Path(workspace).is_dir():
        return HeartbeatSkip("Skipped (workspace missing)")
    content = read_heartbeat_file(Path(workspace))
    if content is None:
        return HeartbeatSkip("Skipped (no file)")
    return HeartbeatPrompt(build_prompt(content))
