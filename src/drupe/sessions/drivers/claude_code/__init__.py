"""The Claude Code driver: agent sessions run by the CLI bundled with ``claude-agent-sdk``.

Modules: ``driver`` (the driver and its options), ``connection`` (one CLI process, its owning
task, approvals, reconcile), ``events`` (pure SDK message -> runtime event translation),
``blocks`` (a model message's content blocks -> UI chunks), ``steer`` (the ``PreToolUse``
steer holder and the boundary), ``content`` and ``usage`` (pure value conversions), ``warm``
(prewarmed connections). Needs the ``claude`` extra.
"""

from __future__ import annotations

from drupe.sessions.drivers.claude_code.connection import ClaudeCodeConnection
from drupe.sessions.drivers.claude_code.driver import (
    ClaudeCodeConfig,
    ClaudeCodeDriver,
    build_options,
)
from drupe.sessions.drivers.claude_code.events import Translator
from drupe.sessions.drivers.claude_code.steer import SteerHolder

__all__ = [
    "ClaudeCodeConfig",
    "ClaudeCodeConnection",
    "ClaudeCodeDriver",
    "SteerHolder",
    "Translator",
    "build_options",
]
