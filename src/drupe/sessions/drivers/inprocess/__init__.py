"""The in-process driver: agent sessions run by Drupe's own agent loop in a workspace.

Modules: ``driver`` (the driver, workspace validation, the tool selection), ``connection`` (one
session's runtime: turns, steering at step boundaries, approvals in place, history),
``turn_run`` (one turn's bookkeeping and the pure helpers around it),
``workspace_tools`` (file tools confined to the workspace, the opt-in shell).
"""

from __future__ import annotations

from drupe.sessions.drivers.inprocess.connection import InProcessConnection
from drupe.sessions.drivers.inprocess.driver import InProcessDriver, LoadHistory
from drupe.sessions.drivers.inprocess.workspace_tools import (
    WorkspaceToolOptions,
    confine,
    workspace_tools,
)

__all__ = [
    "InProcessConnection",
    "InProcessDriver",
    "LoadHistory",
    "WorkspaceToolOptions",
    "confine",
    "workspace_tools",
]
