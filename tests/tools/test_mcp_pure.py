"""Pure parts of MCP support: server config, wire names, the tool-cache state machine."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from drupe.errors import ConfigError
from drupe.tools.base import ToolContext, ToolEntry
from drupe.tools.mcp.cache import (
    EMPTY_TTL_S,
    FAILURE_BACKOFF_S,
    CachedTools,
    on_failure,
    on_inactive,
    on_lookup,
    on_success,
)
from drupe.tools.mcp.config import McpServerConfig, slugify, tool_wire_name, wire_names


async def _noop(arguments: Mapping[str, Any], context: ToolContext) -> Any:
    return None


TOOL = ToolEntry(name="mcp__s__t", description="", input_schema={}, execute=_noop)


def test_config_validation() -> None:
    assert McpServerConfig(id="fs", command="npx").transport == "stdio"
    assert McpServerConfig(id="web", transport="http", url="http://x/mcp").namespace == "mcp:web"
    with pytest.raises(ConfigError, match="needs a command"):
        McpServerConfig(id="fs")
    with pytest.raises(ConfigError, match="needs a url"):
        McpServerConfig(id="web", transport="http")
    with pytest.raises(ConfigError, match="no usable characters"):
        McpServerConfig(id="!!!", command="x")


def test_wire_names() -> None:
    assert slugify("Shout Text!") == "shout_text"
    assert tool_wire_name("GitHub", "create-issue") == "mcp__github__create-issue"
    long_name = tool_wire_name("server", "x" * 200)
    assert len(long_name) == 64 and long_name.startswith("mcp__server__xxx")
    assert tool_wire_name("server", "x" * 200) == long_name  # stable
    long_server = tool_wire_name("s" * 80, "t")
    assert len(long_server) <= 64 and long_server.endswith("__t")
    mapping = wire_names("srv", ["Read File", "read_file", "other"])
    assert mapping["Read File"] == "mcp__srv__read_file"
    assert mapping["read_file"].startswith("mcp__srv__read_file_")
    assert len(set(mapping.values())) == 3


def test_cache_lookup_table() -> None:
    never = CachedTools()
    assert on_lookup(never, now=0, refreshing=False) == ([], True)
    assert on_lookup(never, now=0, refreshing=True) == ([], False)  # single-flight

    ready = on_success(never, (TOOL,), now=10)
    assert ready.state == "ready"
    assert on_lookup(ready, now=10_000, refreshing=False) == ([TOOL], False)

    empty = on_success(never, (), now=10)
    assert empty.state == "empty"
    assert on_lookup(empty, now=10 + EMPTY_TTL_S - 1, refreshing=False) == ([], False)
    assert on_lookup(empty, now=10 + EMPTY_TTL_S, refreshing=False) == ([], True)

    failed = on_failure(ready, "boom", now=10)
    assert failed.state == "failed" and failed.tools == () and failed.last_error == "boom"
    assert on_lookup(failed, now=10 + FAILURE_BACKOFF_S - 0.001, refreshing=False) == ([], False)
    assert on_lookup(failed, now=10 + FAILURE_BACKOFF_S, refreshing=False) == ([], True)
    assert on_lookup(failed, now=10 + FAILURE_BACKOFF_S, refreshing=True) == ([], False)

    inactive = on_inactive(ready, now=10)
    assert on_lookup(inactive, now=1e9, refreshing=False) == ([], False)


def test_a_misspelt_mcp_key_is_refused_with_the_right_spelling() -> None:
    from drupe.tools.mcp.config_file import parse_mcp_servers

    with pytest.raises(ConfigError) as refused:
        parse_mcp_servers({"mcp": {"servers": {"files": {"type": "stdio", "command": "x"}}}})
    assert str(refused.value) == (
        '[mcp.servers.files] has unknown keys [\'type\']: use transport = "stdio" or "http"'
    )
    with pytest.raises(ConfigError) as refused:
        parse_mcp_servers({"mcp": {"servers": {"s": {"cmd": "x", "colour": "red"}}}})
    assert str(refused.value) == "[mcp.servers.s] has unknown keys ['cmd', 'colour']"
    (server,) = parse_mcp_servers(
        {"mcp": {"servers": {"web": {"transport": "http", "url": "http://127.0.0.1:9/mcp"}}}}
    )
    assert (server.transport, server.url) == ("http", "http://127.0.0.1:9/mcp")
