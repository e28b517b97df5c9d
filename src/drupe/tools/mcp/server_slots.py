"""The catalog's per-server slot, and the status snapshots built from slots.

Owns: ``ServerSlot`` (one configured MCP server: its config, cached tools, its one connection,
the in-flight refresh and its counters), ``ServerState``, ``McpServerStatus`` (one server as
``/api/mcp`` and ``drupe doctor`` show it), ``slot_state``, ``slot_status`` and
``slots_statistics``. ``McpCatalog`` (``catalog.py``) owns and mutates the slots.

Must never: mutate a slot (the snapshots only read), or import the MCP SDK at run time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio

from drupe.tools.mcp.cache import CachedTools
from drupe.tools.mcp.config import McpServerConfig

if TYPE_CHECKING:
    from drupe.tools.mcp.client import McpConnection

__all__ = [
    "McpServerStatus",
    "ServerSlot",
    "ServerState",
    "slot_state",
    "slot_status",
    "slots_statistics",
]

ServerState = Literal["never", "connecting", "connected", "failed", "disconnected", "inactive"]


@dataclass(frozen=True, slots=True)
class McpServerStatus:
    """One server as ``/api/mcp`` and ``drupe doctor`` show it."""

    id: str
    name: str
    transport: str
    active: bool
    state: ServerState
    tool_count: int
    last_error: str | None
    retry_in_s: float | None
    connect_attempts: int
    refreshing: bool
    refreshes: int
    """Finished refresh attempts (each connects only when there is no live connection)."""
    tool_names: tuple[str, ...] = ()
    """The cached tools' wire names (``mcp__<server>__<tool>``), as the model sees them."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class ServerSlot:
    """One configured server in the catalog."""

    config: McpServerConfig
    cache: CachedTools = field(default_factory=CachedTools)
    connection: McpConnection | None = None
    inflight: anyio.Event | None = None
    rerun: bool = False
    connect_attempts: int = 0
    refreshes: int = 0


def slot_state(slot: ServerSlot) -> ServerState:
    """The server's state: inactive, connected, connecting, failed, never or disconnected."""
    if not slot.config.active:
        return "inactive"
    if slot.connection is not None and slot.connection.usable:
        return "connected"
    if slot.inflight is not None:
        return "connecting"
    if slot.cache.state == "failed":
        return "failed"
    if slot.cache.state == "never":
        return "never"
    return "disconnected"


def slot_status(slot: ServerSlot, now: float) -> McpServerStatus:
    """State, tool count, last error, backoff left (at ``now``) and connect attempts."""
    return McpServerStatus(
        id=slot.config.id,
        name=slot.config.display_name,
        transport=slot.config.transport,
        active=slot.config.active,
        state=slot_state(slot),
        tool_count=len(slot.cache.tools),
        last_error=slot.cache.last_error
        or (slot.connection.error if slot.connection is not None else None),
        retry_in_s=(
            max(0.0, slot.cache.retry_at - now) if slot.cache.retry_at is not None else None
        ),
        connect_attempts=slot.connect_attempts,
        refreshing=slot.inflight is not None,
        refreshes=slot.refreshes,
        tool_names=tuple(tool.name for tool in slot.cache.tools),
    )


def slots_statistics(slots: Iterable[ServerSlot]) -> dict[str, int]:
    """Counts by state, total cached tools and connect attempts."""
    slots = list(slots)
    stats = {"servers": len(slots), "tools": 0, "connect_attempts": 0}
    for state in ("never", "connecting", "connected", "failed", "disconnected", "inactive"):
        stats[state] = 0
    for slot in slots:
        stats[slot_state(slot)] += 1
        stats["tools"] += len(slot.cache.tools)
        stats["connect_attempts"] += slot.connect_attempts
    return stats
