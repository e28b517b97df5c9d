"""The MCP proxy with the official MCP client (``mcp`` package): Drupe's configured servers,
served at ``/v1/mcps/{id}/mcp`` behind gateway keys, under Drupe's approval policy."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Literal

import httpx
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from tests.gateway.compat.conftest import Gateway, open_gateway

DEMO = Path(__file__).resolve().parents[2] / "tools" / "mcp_servers" / "demo_server.py"


def leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


@pytest.fixture
async def mcp_gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    config = tmp_path / "mcp.toml"  # open_gateway writes its own config.toml
    config.write_text(
        'default_model = "scripted:echo"\n'
        f'[mcp.servers.demo]\ncommand = "{sys.executable}"\nargs = ["{DEMO}"]\n'
        f'[mcp.servers.gated]\nname = "Gated demo"\ncommand = "{sys.executable}"\n'
        f'args = ["{DEMO}"]\nrequire_approval = true\n'
    )
    async with open_gateway(tmp_path, config_path=config) as gw:
        yield gw


@asynccontextmanager
async def proxy_client(
    gateway: Gateway, server_id: str, *, key: str | None = None, mode: Literal["auto", "legacy"]
) -> AsyncIterator[Client]:
    headers = {"authorization": f"Bearer {key or gateway.key}"}
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
        target = streamable_http_client(f"{gateway.url}/v1/mcps/{server_id}/mcp", http_client=http)
        client = await stack.enter_async_context(Client(target, mode=mode))
        yield client


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_list_and_call_tools_through_the_proxy(
    mcp_gateway: Gateway, mode: Literal["auto", "legacy"]
) -> None:
    async with proxy_client(mcp_gateway, "demo", mode=mode) as client:
        listed = await client.list_tools()
        added = await client.call_tool("add", {"a": 2, "b": 40})
        failed = await client.call_tool("fail", {})
    names = {tool.name for tool in listed.tools}
    assert {"add", "Shout Text", "fail"} <= names  # the server's own names, not mcp__demo__*
    add = next(tool for tool in listed.tools if tool.name == "add")
    assert add.description == "Add two integers."
    assert set(add.input_schema["properties"]) == {"a", "b"}
    assert added.is_error is False
    assert added.structured_content == {"result": 42}
    assert [c.text for c in added.content if isinstance(c, types.TextContent)] == ["42"]
    assert failed.is_error is True
    assert "boom from the server" in str(failed.content)


async def test_a_gated_server_refuses_tool_calls_without_running_them(
    mcp_gateway: Gateway,
) -> None:
    async with proxy_client(mcp_gateway, "gated", mode="auto") as client:
        listed = await client.list_tools()
        refused = await client.call_tool("die", {})  # would kill the server if it ran
        again = await client.call_tool("add", {"a": 1, "b": 1})
    assert "die" in {tool.name for tool in listed.tools}
    assert refused.is_error is True and again.is_error is True
    [text] = [c.text for c in refused.content if isinstance(c, types.TextContent)]
    assert "requires approval" in text and "no interactive approver" in text
    assert mcp_gateway.runtime.mcp is not None
    [gated] = [s for s in mcp_gateway.runtime.mcp.status() if s.id == "gated"]
    assert gated.state == "connected"  # the server is still alive: "die" never ran


async def test_bad_key_and_unknown_server_are_refused(mcp_gateway: Gateway) -> None:
    with pytest.raises(BaseExceptionGroup) as caught:  # the SDK's task groups wrap it
        async with proxy_client(
            mcp_gateway, "demo", key="drp_not-a-real-key-at-all-000000000", mode="legacy"
        ) as client:
            await client.list_tools()
    assert any(isinstance(leaf, MCPError) for leaf in leaves(caught.value))
    async with httpx.AsyncClient(base_url=mcp_gateway.url) as http:
        bare = await http.post("/v1/mcps/demo/mcp", json={})
        unknown = await http.post(
            "/v1/mcps/nope/mcp",
            json={},
            headers={"authorization": f"Bearer {mcp_gateway.key}"},
        )
    assert bare.status_code == 401
    assert bare.json()["error"]["code"] == "invalid_api_key"
    assert unknown.status_code == 404
    assert "unknown MCP server 'nope'" in unknown.json()["error"]["message"]


async def test_mcps_lists_the_configured_servers(mcp_gateway: Gateway) -> None:
    headers = {"authorization": f"Bearer {mcp_gateway.key}"}
    async with httpx.AsyncClient(base_url=mcp_gateway.url, headers=headers) as http:
        listed = await http.get("/v1/mcps")
        one = await http.get("/v1/mcps/gated")
        missing = await http.get("/v1/mcps/nope")
        bare = await http.get("/v1/mcps", headers={"authorization": ""})
    by_id = {item["id"]: item for item in listed.json()["data"]}
    assert set(by_id) == {"demo", "gated"}
    assert by_id["demo"]["url"] == "/v1/mcps/demo/mcp"
    assert by_id["demo"]["require_approval"] is False
    assert one.json()["require_approval"] is True and one.json()["name"] == "Gated demo"
    assert missing.status_code == 404
    assert bare.status_code == 401


async def test_no_mcp_servers_means_an_empty_list(tmp_path: Path) -> None:
    async with open_gateway(tmp_path) as gw:
        headers = {"authorization": f"Bearer {gw.key}"}
        async with httpx.AsyncClient(base_url=gw.url, headers=headers) as http:
            listed = await http.get("/v1/mcps")
            proxied = await http.post("/v1/mcps/demo/mcp", json={})
    assert listed.json() == {"object": "list", "data": []}
    assert proxied.status_code == 404
