"""MCP server configuration and the wire names of MCP tools.

``McpServerConfig`` describes one server (stdio command or streamable-HTTP URL) and its policy.
``tool_wire_name`` maps ``(server id, tool name)`` to the model-facing name
``mcp__<server-slug>__<tool-slug>``: lowercase ``[a-z0-9_-]``, at most 64 characters (the limit
the OpenAI and Anthropic APIs share); a name that had to be shortened or that collides with
another tool of the same server gets a short digest suffix so it stays unique and stable.
Pure values and functions only: nothing here connects.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from drupe.errors import ConfigError

__all__ = [
    "MAX_WIRE_NAME",
    "McpServerConfig",
    "McpTransport",
    "server_slug",
    "slugify",
    "tool_wire_name",
    "wire_names",
]

McpTransport = Literal["stdio", "http"]
MAX_WIRE_NAME = 64
_NOT_SLUG = re.compile(r"[^a-z0-9_-]+")
_DIGEST_CHARS = 6
_MAX_SERVER_SLUG = 24


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServerConfig:
    """One MCP server as configured."""

    id: str
    """Stable id; its slug names the server in tool wire names (``mcp__<slug>__...``)."""
    name: str = ""
    transport: McpTransport = "stdio"
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment for a stdio server, merged over the SDK's safe default environment."""
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    """HTTP headers for a streamable-HTTP server (for example ``Authorization``)."""
    protocol: Literal["auto", "legacy"] = "auto"
    """``auto`` negotiates the newest protocol; ``legacy`` forces the initialize handshake."""
    active: bool = True
    require_approval: bool = False
    """Force an approval prompt for every tool of this server (tools become ``defer='never'``)."""

    def __post_init__(self) -> None:
        if not slugify(self.id):
            raise ConfigError(f"MCP server id {self.id!r} has no usable characters")
        if self.transport == "stdio" and not self.command:
            raise ConfigError(f"MCP server {self.id!r}: a stdio server needs a command")
        if self.transport == "http" and not self.url:
            raise ConfigError(f"MCP server {self.id!r}: an http server needs a url")
        if self.transport not in ("stdio", "http"):
            raise ConfigError(f"MCP server {self.id!r}: unknown transport {self.transport!r}")

    @property
    def display_name(self) -> str:
        return self.name or self.id

    @property
    def slug(self) -> str:
        return server_slug(self.id)

    @property
    def namespace(self) -> str:
        return f"mcp:{self.id}"


def slugify(text: str) -> str:
    """Lowercase, with every run of characters outside ``[a-z0-9_-]`` turned into ``_``."""
    slug = _NOT_SLUG.sub("_", text.lower()).strip("_")
    return re.sub(r"_{2,}", "_", slug)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_DIGEST_CHARS]


def server_slug(server_id: str) -> str:
    """The server part of a wire name: the id's slug, at most 24 characters."""
    slug = slugify(server_id)
    if len(slug) <= _MAX_SERVER_SLUG:
        return slug
    return slug[: _MAX_SERVER_SLUG - _DIGEST_CHARS - 1] + "_" + _digest(server_id)


def tool_wire_name(server_id: str, tool_name: str, *, force_digest: bool = False) -> str:
    """``mcp__<server-slug>__<tool-slug>``, shortened with a digest when over 64 characters."""
    prefix = f"mcp__{server_slug(server_id)}__"
    tool_slug = slugify(tool_name) or "tool"
    name = prefix + tool_slug
    if not force_digest and len(name) <= MAX_WIRE_NAME:
        return name
    suffix = "_" + _digest(f"{server_id}\0{tool_name}")
    room = MAX_WIRE_NAME - len(prefix) - len(suffix)
    return prefix + tool_slug[:room] + suffix


def wire_names(server_id: str, tool_names: Iterable[str]) -> dict[str, str]:
    """Map each tool name of one server to a unique wire name (tool name -> wire name).

    A tool whose plain slug collides with an earlier tool's wire name gets the digest form, so
    the mapping depends only on the listing order the server reports.
    """
    taken: set[str] = set()
    mapping: dict[str, str] = {}
    for tool_name in tool_names:
        wire = tool_wire_name(server_id, tool_name)
        if wire in taken:
            wire = tool_wire_name(server_id, tool_name, force_digest=True)
        taken.add(wire)
        mapping[tool_name] = wire
    return mapping
