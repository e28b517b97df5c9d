"""MCP support over the official ``mcp`` SDK: server config, owned connections, the tool catalog.

``McpCatalog`` (catalog.py) is what the rest of Drupe uses: a cache-only ``list_tools`` for the
hot path, ``refresh``/``prewarm`` that connect, ``call_tool``, and status snapshots.
``McpConnection`` (client.py) owns one session in one task. Nothing here imports the web stack.
"""

from __future__ import annotations

from drupe.tools.mcp.catalog import McpCatalog, McpServerStatus
from drupe.tools.mcp.config import McpServerConfig, tool_wire_name

__all__ = ["McpCatalog", "McpServerConfig", "McpServerStatus", "tool_wire_name"]
