"""The MCP proxy: Drupe's configured MCP servers, served again as streamable-HTTP MCP endpoints.

* ``GET /v1/mcps``: the configured servers (id, name, transport, state, tool count, whether
  every tool call needs approval, and the endpoint URL path).
* ``/v1/mcps/{server_id}/mcp``: one streamable-HTTP MCP endpoint per server, behind gateway
  keys (``Authorization: Bearer``; 401 JSON otherwise, 404 for an unknown server). It is the
  official MCP SDK's server side: a low-level ``mcp.server.lowlevel.Server`` per configured
  server, run by a ``StreamableHTTPSessionManager`` (stateful sessions). Another MCP client
  (Claude Code, an IDE) then uses Drupe's servers through Drupe's one connection per server
  (``McpCatalog``) and under Drupe's policy.
* ``tools/list`` lists the server's tools under their own names (a refresh through the
  catalog); ``tools/call`` relays to the catalog's connection and answers the server's own
  result. A server configured with ``require_approval`` forces an approval for every call:
  the proxy has no interactive approver, so such a call is refused with an ``is_error``
  result saying why, and the tool never runs.

Lifetimes: a server's session manager starts on its first request, in a task of the stream
manager's task group (``run()`` is entered there and left when the runtime closes), so
nothing here outlives the runtime and no app lifespan is needed. The SDK is imported on the
first proxied request only (it costs about a second), never at boot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskStatus
from fastapi import APIRouter, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from drupe.errors import ToolError
from drupe.gateway.keys import key_dependency
from drupe.gateway.openai_compat import openai_error_body
from drupe.gateway.prompt import GatewayError, GatewayFailure, json_response

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from drupe.app import Runtime
    from drupe.tools.mcp.catalog import McpCatalog
    from drupe.tools.mcp.config import McpServerConfig

__all__ = ["McpProxy", "add_routes", "approval_refusal"]


def approval_refusal(config: McpServerConfig, tool_name: str) -> str:
    return (
        f"tool {tool_name!r} of MCP server {config.id!r} requires approval "
        "(require_approval is set for this server) and the MCP proxy has no interactive "
        "approver: the call was refused and the tool did not run"
    )


def _server(catalog: McpCatalog, config: McpServerConfig) -> Server[Any]:
    """The low-level MCP server that relays one configured server."""
    import mcp_types as types  # the MCP SDK costs ~1 s to import: only when first used
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel.server import Server

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        entries = await catalog.refresh(config.id)
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=str(entry.metadata.get("tool_name", entry.name)),
                    description=entry.description,
                    input_schema=dict(entry.input_schema),
                )
                for entry in entries
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if config.require_approval:
            text = approval_refusal(config, params.name)
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=text)], is_error=True
            )
        try:
            return await catalog.call_tool_result(config.id, params.name, params.arguments or {})
        except ToolError as err:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=str(err))], is_error=True
            )

    return Server(
        f"drupe-proxy:{config.id}",
        instructions=f"Drupe's proxy of the MCP server {config.display_name!r}.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


class McpProxy:
    """The ASGI endpoint of ``/v1/mcps/{server_id}/mcp`` (one session manager per server)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.auth = key_dependency(runtime, openai_error_body, allow_x_api_key=False)
        self._managers: dict[str, StreamableHTTPSessionManager] = {}
        self._lock = anyio.Lock()

    def config(self, server_id: str) -> McpServerConfig | None:
        catalog = self.runtime.mcp
        if catalog is None:
            return None
        return next((c for c in catalog.servers() if c.id == server_id), None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            await self.auth(request)
        except GatewayError as err:
            await err.response()(scope, receive, send)
            return
        server_id = str(scope.get("path_params", {}).get("server_id", ""))
        config = self.config(server_id)
        catalog = self.runtime.mcp
        if config is None or catalog is None:
            failure = GatewayFailure(404, "not_found", f"unknown MCP server {server_id!r}")
            await json_response(404, openai_error_body(failure))(scope, receive, send)
            return
        manager = await self._manager(catalog, config)
        await manager.handle_request(scope, receive, send)

    async def _manager(
        self, catalog: McpCatalog, config: McpServerConfig
    ) -> StreamableHTTPSessionManager:
        async with self._lock:
            manager = self._managers.get(config.id)
            if manager is None:
                from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

                manager = StreamableHTTPSessionManager(_server(catalog, config))
                await self.runtime.manager.task_group.start(self._run, manager)
                self._managers[config.id] = manager
            return manager

    @staticmethod
    async def _run(manager: StreamableHTTPSessionManager, *, task_status: TaskStatus[None]) -> None:
        async with manager.run():
            task_status.started()
            await anyio.sleep_forever()


def _listing(config: McpServerConfig, status: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": config.id,
        "object": "mcp_server",
        "name": config.display_name,
        "transport": config.transport,
        "active": config.active,
        "require_approval": config.require_approval,
        "state": status.get("state"),
        "tool_count": status.get("tool_count", 0),
        "url": f"/v1/mcps/{config.id}/mcp",
    }


def add_routes(router: APIRouter, runtime: Runtime, key_dep: Any) -> None:
    """``GET /v1/mcps``, ``GET /v1/mcps/{server_id}`` and the proxy endpoint."""
    proxy = McpProxy(runtime)

    def listing() -> list[dict[str, Any]]:
        catalog = runtime.mcp
        if catalog is None:
            return []
        status = {s.id: s.as_dict() for s in catalog.status()}
        return [_listing(c, status.get(c.id, {})) for c in catalog.servers()]

    @router.get("/v1/mcps", dependencies=[key_dep], summary="List the MCP servers Drupe proxies")
    async def list_mcps() -> Response:
        return json_response(200, {"object": "list", "data": listing()})

    @router.get("/v1/mcps/{server_id}", dependencies=[key_dep], summary="One proxied MCP server")
    async def get_mcp(server_id: str) -> Response:
        found = next((item for item in listing() if item["id"] == server_id), None)
        if found is None:
            raise GatewayError(
                GatewayFailure(404, "not_found", f"unknown MCP server {server_id!r}"),
                openai_error_body,
            )
        return json_response(200, found)

    router.add_route(
        "/v1/mcps/{server_id}/mcp",
        proxy,  # type: ignore[arg-type]  # an ASGI app: Starlette's Route serves it as is
        methods=["GET", "POST", "DELETE"],
        include_in_schema=False,
    )
