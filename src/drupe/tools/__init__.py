"""Tools the model can call: the registry, deferral (cost gate) and meta-tools, approvals, MCP.

The shared value type is ``drupe.tools.base.ToolEntry``; the agent loop executes entries, it
never builds them. This package never imports the web framework or the database.
"""

from __future__ import annotations
