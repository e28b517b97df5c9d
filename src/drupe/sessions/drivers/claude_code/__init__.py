"""The Claude Code driver: agent sessions run by the CLI bundled with ``claude-agent-sdk``.

Modules: ``driver`` (the driver and its options), ``connection`` (one CLI process, its owning
task, approvals, reconcile), ``events`` (pure SDK message -> runtime event translation),
``blocks`` (a model message's content blocks -> UI chunks), ``steer`` (the ``PreToolUse``
steer holder and the boundary), ``content`` and ``usage`` (pure value conversions), ``warm``
(prewarmed connections). Needs the ``claude`` extra.

Importing this package, or ``driver``, does not import the SDK (it pulls in the MCP SDK: about a
second): ``ClaudeCodeConnection`` and ``Translator`` are loaded on first access, and the driver
loads them on its first ``connect``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drupe.sessions.drivers.claude_code.driver import (
    ClaudeCodeConfig,
    ClaudeCodeDriver,
    build_options,
)
from drupe.sessions.drivers.claude_code.steer import SteerHolder

if TYPE_CHECKING:
    from drupe.sessions.drivers.claude_code.connection import ClaudeCodeConnection
    from drupe.sessions.drivers.claude_code.events import Translator

__all__ = [
    "ClaudeCodeConfig",
    "ClaudeCodeConnection",
    "ClaudeCodeDriver",
    "SteerHolder",
    "Translator",
    "build_options",
]


def __getattr__(name: str) -> Any:
    if name == "ClaudeCodeConnection":
        from drupe.sessions.drivers.claude_code import connection

        return connection.ClaudeCodeConnection
    if name == "Translator":
        from drupe.sessions.drivers.claude_code import events

        return events.Translator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
