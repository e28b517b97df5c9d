"""A real MCP server for the tests (official SDK): stdio when run as a script, HTTP via build().

Tools: ``add``, ``Shout Text`` (a name that needs a slug), ``fail`` (raises), ``slow`` (sleeps),
``die`` (exits) and ``grow`` (registers a new tool and sends a tools list-changed notification).
"""

from __future__ import annotations

import logging
import os

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError


def build() -> MCPServer:
    server = MCPServer("demo")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool(name="Shout Text")
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    @server.tool()
    def fail() -> str:
        """Always fails (with a message the client sees)."""
        raise ToolError("boom from the server")

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleep, then answer."""
        await anyio.sleep(seconds)
        return "late"

    @server.tool()
    def die() -> str:
        """Exit the server process at once (a crash mid-session)."""
        os._exit(7)

    @server.tool()
    async def grow(name: str, ctx: Context) -> str:
        """Register a tool called ``name`` and announce the change."""

        def grown() -> str:
            return f"I am {name}"

        server.add_tool(grown, name=name, description=f"grown tool {name}")
        await ctx.notify_tools_changed()
        await ctx.session.send_tool_list_changed()
        return "grown"

    return server


if __name__ == "__main__":
    logging.disable(logging.WARNING)
    build().run("stdio")
