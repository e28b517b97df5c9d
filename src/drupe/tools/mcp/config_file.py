"""MCP servers from ``config.toml``: the ``[mcp.servers.<id>]`` tables.

```toml
[mcp.servers.files]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"]

[mcp.servers.search]
transport = "http"
url = "http://127.0.0.1:9000/mcp"
require_approval = true
```

A bad table raises ``ConfigError`` naming the server and the key. Reading a file is the caller's
job (the composition root reads the same file as the model config).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from drupe.errors import ConfigError
from drupe.tools.mcp.config import McpServerConfig

__all__ = ["load_mcp_servers", "parse_mcp_servers"]

_KEYS = frozenset(
    (
        "name",
        "transport",
        "command",
        "args",
        "env",
        "cwd",
        "url",
        "headers",
        "protocol",
        "active",
        "require_approval",
    )
)

#: What a newcomer may write instead of the real key (other MCP clients' spellings).
_HINTS = {
    "type": ': use transport = "stdio" or "http"',
    "cmd": ": use command",
    "arguments": ": use args",
    "endpoint": ": use url",
    "environment": ": use env",
    "enabled": ": use active",
}


def parse_mcp_servers(document: Mapping[str, Any]) -> list[McpServerConfig]:
    """The MCP servers of a parsed TOML document (``[]`` when there is no ``mcp`` table)."""
    mcp = document.get("mcp", {})
    if not isinstance(mcp, Mapping):
        raise ConfigError("[mcp] must be a table")
    servers = mcp.get("servers", {})
    if not isinstance(servers, Mapping):
        raise ConfigError("[mcp.servers] must be a table of tables")
    out: list[McpServerConfig] = []
    for server_id, table in servers.items():
        if not isinstance(table, Mapping):
            raise ConfigError(f"[mcp.servers.{server_id}] must be a table")
        unknown = sorted(set(table) - _KEYS)
        if unknown:
            hint = _HINTS.get(unknown[0], "") if len(unknown) == 1 else ""
            raise ConfigError(f"[mcp.servers.{server_id}] has unknown keys {unknown!r}{hint}")
        values: dict[str, Any] = dict(table)
        if "args" in values:
            values["args"] = tuple(str(a) for a in values["args"])
        out.append(McpServerConfig(id=str(server_id), **values))
    return out


def load_mcp_servers(path: Path) -> list[McpServerConfig]:
    """Read ``path`` (missing file: no servers)."""
    if not path.exists():
        return []
    try:
        document = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"cannot read {path}: {err}") from err
    return parse_mcp_servers(document)
