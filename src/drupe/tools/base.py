"""``ToolEntry``: the one value type shared by the tool registry and the agent loop.

An entry is a frozen value: the registry builds it, the loop advertises ``name``,
``description`` and ``input_schema`` to the model and awaits ``execute`` with the parsed
arguments. ``execute`` may raise; the loop reports the error as ``tool-output-error``. A tool
whose ``needs_approval`` predicate returns true for the arguments is not executed until a human
approves it (see ``docs/lifecycles/turn-and-tools.md``).

A running tool may report progress through ``ToolContext.progress(output)``: a snapshot of its
output so far, which the turn streams live as a preliminary ``tool-output-available`` (each one
replaces the previous; the final output replaces them all). Reporting never blocks and never
fails the tool; where the turn has no live channel, or once the call has ended, it does nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["DeferMode", "ToolContext", "ToolEntry"]

DeferMode = Literal["never", "always", "auto"]


def _no_progress(output: Any) -> None:
    """The default reporter: progress goes nowhere."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """What a tool sees of the turn that calls it."""

    conversation_id: str
    tool_call_id: str
    message_id: str | None = None
    progress: Callable[[Any], None] = _no_progress
    """Report a snapshot of the output so far (plain JSON-able data); synchronous, never raises."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolEntry:
    """One tool as the model sees it and as the loop runs it."""

    name: str
    """The wire name the model calls (``mcp__<server>__<tool>`` for MCP tools)."""
    description: str
    input_schema: Mapping[str, Any]
    """JSON schema of the arguments object."""
    execute: Callable[[Mapping[str, Any], ToolContext], Awaitable[Any]]
    namespace: str = "builtin"
    """``builtin``, ``kb``, ``web``, ``mcp:<server>`` or ``meta``."""
    defer: DeferMode = "auto"
    needs_approval: Callable[[Mapping[str, Any]], bool] | None = None
    """``None`` means never; a throwing predicate counts as gated (fail closed)."""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def is_approval_gated(self, arguments: Mapping[str, Any]) -> bool:
        """Return whether a call with ``arguments`` needs a human decision (fail closed)."""
        if self.needs_approval is None:
            return False
        try:
            return bool(self.needs_approval(arguments))
        except Exception:  # isolation boundary: a throwing predicate counts as gated
            return True
