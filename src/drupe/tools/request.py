"""``prepare_tools``: the one call that turns a request's tool choice into what the model sees.

It reads the registry and the MCP catalog's CACHE (``McpCatalog.list_tools`` never connects), so
it is a plain synchronous function: a dead or hanging MCP server cannot delay a turn, it simply
contributes no tools until a background refresh succeeds. It then applies the cost gate
(``drupe.tools.deferral.plan_exposition``). It never executes a tool and never mutates the
registry.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from drupe.tools.base import ToolEntry
from drupe.tools.deferral import Exposition, plan_exposition
from drupe.tools.registry import ToolRegistry, ToolScope

if TYPE_CHECKING:  # importing the MCP SDK costs about a second; only the catalog needs it
    from drupe.tools.mcp.catalog import McpCatalog

__all__ = ["ToolRequest", "prepare_tools", "request_tools"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolRequest:
    """Which tools one request asks for."""

    names: Collection[str] | None = None
    """Wire names (registry or MCP); ``None`` means every registry tool and every MCP tool."""
    mcp_servers: Collection[str] | None = None
    """MCP server ids to draw tools from; ``None`` means every active configured server."""
    scope: ToolScope | None = None
    context_window: int | None = None


def request_tools(
    registry: ToolRegistry, catalog: McpCatalog | None, request: ToolRequest
) -> list[ToolEntry]:
    """Registry tools first (registration order), then cached MCP tools; registry names win."""
    selected = registry.select(request.names, request.scope)
    if catalog is None:
        return selected
    wanted = None if request.names is None else frozenset(request.names)
    seen = {entry.name for entry in selected}
    server_ids = (
        [config.id for config in catalog.servers() if config.active]
        if request.mcp_servers is None
        else list(request.mcp_servers)
    )
    for server_id in server_ids:
        for entry in catalog.list_tools(server_id):
            if entry.name in seen or (wanted is not None and entry.name not in wanted):
                continue
            seen.add(entry.name)
            selected.append(entry)
    return selected


def prepare_tools(
    registry: ToolRegistry, catalog: McpCatalog | None, request: ToolRequest
) -> Exposition:
    """The request's tools split into inline and deferred ones, plus meta-tools if needed."""
    return plan_exposition(
        request_tools(registry, catalog, request), context_window=request.context_window
    )
