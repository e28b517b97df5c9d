"""MCP support over the official ``mcp`` SDK: server config, owned connections, the tool catalog.

``McpCatalog`` (catalog.py) is what the rest of Drupe uses: a cache-only ``list_tools`` for the
hot path, ``refresh``/``prewarm`` that connect, ``call_tool``, and status snapshots.
``McpConnection`` (client.py) owns one session in one task. Nothing here imports the web stack.

Importing this package (or its ``config``/``config_file`` modules) does not import the MCP SDK,
which costs most of a second: the catalog is imported on first use, so a server with no MCP
servers configured never pays for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drupe.tools.mcp.config import McpServerConfig, tool_wire_name

if TYPE_CHECKING:
    from drupe.tools.mcp.catalog import McpCatalog
    from drupe.tools.mcp.server_slots import McpServerStatus

__all__ = ["McpCatalog", "McpServerConfig", "McpServerStatus", "tool_wire_name"]


def __getattr__(name: str) -> Any:
    if name == "McpCatalog":
        from drupe.tools.mcp import catalog

        return catalog.McpCatalog
    if name == "McpServerStatus":
        from drupe.tools.mcp import server_slots

        return server_slots.McpServerStatus
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
