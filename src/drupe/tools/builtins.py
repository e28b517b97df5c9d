"""``ToolSettings`` and the built-in tools they switch on.

The built-ins are offered only as configured: in particular the code-execution tool
(``python_exec``) is absent unless ``code_execution=True``, because model-written code would run
with the server's rights. This module builds entries; it never runs them.
"""

from __future__ import annotations

from dataclasses import dataclass

from drupe.tools.base import ToolEntry
from drupe.tools.code_exec import python_exec_entry
from drupe.tools.registry import ToolRegistry

__all__ = ["ToolSettings", "builtin_tools", "register_builtins"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSettings:
    """Which built-in tools a deployment offers."""

    code_execution: bool = False
    """Offer ``python_exec``. Off by default: it is not a sandbox."""
    code_execution_timeout_s: float = 30.0
    code_execution_requires_approval: bool = True
    """Each ``python_exec`` call waits for a human decision (and so is never deferred)."""


def builtin_tools(settings: ToolSettings | None = None) -> list[ToolEntry]:
    """The built-in entries ``settings`` enables."""
    effective = settings if settings is not None else ToolSettings()
    entries: list[ToolEntry] = []
    if effective.code_execution:
        entries.append(
            python_exec_entry(
                timeout_s=effective.code_execution_timeout_s,
                require_approval=effective.code_execution_requires_approval,
            )
        )
    return entries


def register_builtins(registry: ToolRegistry, settings: ToolSettings | None = None) -> None:
    """Register the enabled built-ins in ``registry`` (replacing earlier copies)."""
    for entry in builtin_tools(settings):
        registry.register(entry, replace=True)
