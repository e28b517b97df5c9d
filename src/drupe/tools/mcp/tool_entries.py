"""MCP tools as Drupe ``ToolEntry`` values, and a tool call's result as the model sees it.

Owns: ``tool_entries`` (a server's listed tools as entries named ``mcp__<server>__<tool>``; a
server with ``require_approval`` gets entries with ``needs_approval`` set and ``defer='never'``;
each entry executes through the given ``call``) and ``call_result_value`` (structured content,
else the text, else the content blocks as JSON; an ``is_error`` result raises ``ToolError``).

Must never: connect or call anything itself (the catalog's ``call_tool`` is passed in).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import mcp_types as types

from drupe.errors import ToolError
from drupe.tools.base import ToolContext, ToolEntry
from drupe.tools.mcp.config import McpServerConfig, wire_names

__all__ = ["ToolCall", "call_result_value", "tool_entries"]

ToolCall = Callable[[str, str, Mapping[str, Any]], Awaitable[Any]]
"""``call(server_id, tool_name, arguments)``: the catalog's ``call_tool``."""


def _always(_arguments: Mapping[str, Any]) -> bool:
    return True


def tool_entries(
    config: McpServerConfig, tools: list[types.Tool], call: ToolCall
) -> Iterable[ToolEntry]:
    """The entries of ``config``'s listed ``tools``, each executing through ``call``."""
    names = wire_names(config.id, [tool.name for tool in tools])
    for tool in tools:
        yield ToolEntry(
            name=names[tool.name],
            description=tool.description
            or tool.title
            or f"{tool.name} (MCP server {config.display_name})",
            input_schema=dict(tool.input_schema),
            execute=_executor(call, config.id, tool.name),
            namespace=config.namespace,
            defer="never" if config.require_approval else "auto",
            needs_approval=_always if config.require_approval else None,
            metadata={
                "server_id": config.id,
                "server_name": config.display_name,
                "tool_name": tool.name,
            },
        )


def _executor(call: ToolCall, server_id: str, tool_name: str) -> Any:
    async def execute(arguments: Mapping[str, Any], context: ToolContext) -> Any:
        return await call(server_id, tool_name, dict(arguments))

    return execute


def call_result_value(result: types.CallToolResult, *, what: str) -> Any:
    """The model-facing value of a tool result; an ``is_error`` result raises ``ToolError``."""
    texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
    if result.is_error:
        raise ToolError(f"{what} failed: {' '.join(texts) or 'the server reported an error'}")
    if result.structured_content is not None:
        return result.structured_content
    if len(texts) == len(result.content):
        return "\n".join(texts)
    return [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in result.content]
