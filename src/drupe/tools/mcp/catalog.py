"""``McpCatalog``: every configured MCP server, its cached tools, and its one owned connection.

Contract:

- ``list_tools(server_id)`` is synchronous and cache-only: it never connects and never waits. A
  never-warmed server answers ``[]`` and starts ONE single-flight background refresh; a failed
  server answers ``[]`` and is not asked again for 30 s; a confirmed-empty one not for 5 minutes
  (the pure rules live in ``drupe.tools.mcp.cache``). Availability is eventually consistent.
- Only ``refresh`` connects (explicitly, from ``prewarm`` at boot 3 servers at a time, from a
  list-changed notification, or from a tool call that finds no live connection). Concurrent
  refreshes of one server share one attempt.
- Each server has at most one ``McpConnection``, whose owning task runs in the catalog's task
  group; the catalog is an async context manager and nothing it starts outlives it.
- Tool entries are named ``mcp__<server>__<tool>``; a server with ``require_approval`` gets entries
  with ``needs_approval`` set and ``defer='never'`` (``tool_entries.py``).
- ``call_tool_result`` answers the server's raw ``CallToolResult`` (for the gateway's MCP proxy).
- ``status()`` / ``statistics()`` are snapshots for ``/api/mcp`` and ``drupe doctor``
  (``server_slots.py``: the per-server slot and its snapshots).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from anyio.abc import TaskGroup

from drupe.errors import ToolError, UsageError
from drupe.lifetimes import TaskOwner
from drupe.tools.base import ToolEntry
from drupe.tools.mcp.cache import CachedTools, on_failure, on_inactive, on_lookup, on_success
from drupe.tools.mcp.client import McpConnection, describe_error
from drupe.tools.mcp.config import McpServerConfig
from drupe.tools.mcp.server_slots import McpServerStatus, ServerSlot, slot_status, slots_statistics
from drupe.tools.mcp.tool_entries import call_result_value, tool_entries
from drupe.tools.registry import ToolRegistry

__all__ = ["McpCatalog"]

logger = logging.getLogger(__name__)

ChangeCallback = Callable[[str, list[ToolEntry]], None]


class McpCatalog(TaskOwner):
    """The MCP servers, their cached tools and their connections (see the module docstring)."""

    def __init__(
        self,
        servers: Iterable[McpServerConfig] = (),
        *,
        clock: Callable[[], float] = time.monotonic,
        connect_timeout_s: float = 15.0,
        list_timeout_s: float = 15.0,
        call_timeout_s: float = 120.0,
        prewarm_concurrency: int = 3,
        on_change: ChangeCallback | None = None,
    ) -> None:
        self._clock = clock
        self._connect_timeout_s = connect_timeout_s
        self._list_timeout_s = list_timeout_s
        self._call_timeout_s = call_timeout_s
        self._prewarm_concurrency = prewarm_concurrency
        self._on_change = on_change
        self._slots: dict[str, ServerSlot] = {}
        self._connecting = 0
        self.peak_connecting = 0
        """Most connection attempts in flight at once (how ``prewarm``'s limit is observed)."""
        for config in servers:
            self.configure(config)

    # -- lifetime ---------------------------------------------------------------------------

    async def _start_tasks(self, group: anyio.abc.TaskGroup) -> None:
        return None  # servers start their tasks as they connect

    async def _before_cancel(self) -> None:
        for slot in self._slots.values():
            if slot.connection is not None:
                slot.connection.close()

    def _task_group(self) -> TaskGroup:
        if self._owned_group is None:
            raise UsageError("McpCatalog must be entered (async with) before it can connect")
        return self._owned_group

    # -- configuration ----------------------------------------------------------------------

    def configure(self, config: McpServerConfig) -> None:
        """Add a server, or replace its config (its connection and cache are dropped)."""
        old = self._slots.get(config.id)
        if old is not None and old.connection is not None:
            old.connection.close()
        self._slots[config.id] = ServerSlot(config)
        if not config.active:
            self._slots[config.id].cache = on_inactive(CachedTools(), now=self._clock())

    def remove(self, server_id: str) -> None:
        slot = self._slots.pop(server_id, None)
        if slot is not None and slot.connection is not None:
            slot.connection.close()

    def servers(self) -> list[McpServerConfig]:
        return [slot.config for slot in self._slots.values()]

    def _require(self, server_id: str) -> ServerSlot:
        slot = self._slots.get(server_id)
        if slot is None:
            raise UsageError(f"unknown MCP server {server_id!r}")
        return slot

    # -- the hot path -----------------------------------------------------------------------

    def list_tools(self, server_id: str) -> list[ToolEntry]:
        """The cached tools of ``server_id``; never connects, never waits (see module doc)."""
        slot = self._slots.get(server_id)
        if slot is None:
            return []
        tools, start = on_lookup(
            slot.cache, now=self._clock(), refreshing=slot.inflight is not None
        )
        if start:
            if self._owned_group is None:
                logger.warning("MCP catalog not running; cannot warm %r", server_id)
            else:
                self._start_refresh(slot)
        return tools

    def sync_registry(
        self, registry: ToolRegistry, server_ids: Iterable[str] | None = None
    ) -> None:
        """Make each server's ``mcp:<id>`` namespace in ``registry`` equal its cached tools."""
        ids = list(self._slots) if server_ids is None else list(server_ids)
        for server_id in ids:
            slot = self._slots.get(server_id)
            if slot is not None:
                registry.sync_namespace(slot.config.namespace, self.list_tools(server_id))

    # -- refresh (connects) -----------------------------------------------------------------

    async def refresh(self, server_id: str) -> list[ToolEntry]:
        """Connect if needed and re-list ``server_id``'s tools (joins an in-flight refresh)."""
        slot = self._require(server_id)
        done = self._start_refresh(slot)
        await done.wait()
        return list(slot.cache.tools)

    async def prewarm(self, active_servers: Iterable[str] | None = None) -> None:
        """Refresh the given (default: every active) server, 3 at a time."""
        ids = (
            [s.config.id for s in self._slots.values() if s.config.active]
            if active_servers is None
            else [i for i in active_servers if i in self._slots]
        )
        limiter = anyio.CapacityLimiter(max(1, self._prewarm_concurrency))

        async def warm(server_id: str) -> None:
            async with limiter:
                await self.refresh(server_id)

        async with anyio.create_task_group() as tg:
            for server_id in ids:
                tg.start_soon(warm, server_id)

    def _start_refresh(self, slot: ServerSlot) -> anyio.Event:
        if slot.inflight is not None:
            return slot.inflight
        done = slot.inflight = anyio.Event()
        self._task_group().start_soon(self._run_refresh, slot, done)
        return done

    async def _run_refresh(self, slot: ServerSlot, done: anyio.Event) -> None:
        try:
            while True:
                slot.rerun = False
                await self._refresh_once(slot)
                slot.refreshes += 1
                if not slot.rerun:
                    break
        finally:
            slot.inflight = None
            done.set()

    async def _refresh_once(self, slot: ServerSlot) -> None:
        config = slot.config
        if not config.active:
            self._close(slot)
            slot.cache = on_inactive(slot.cache, now=self._clock())
        else:
            try:
                connection = await self._connect(slot)
                listed = await connection.list_tools(timeout_s=self._list_timeout_s)
            except Exception as exc:  # isolation boundary: any failure is a cached state
                error = exc.args[0] if isinstance(exc, ToolError) else describe_error(exc)
                slot.cache = on_failure(slot.cache, str(error), now=self._clock())
                self._close(slot)
            else:
                entries = tuple(tool_entries(config, listed, self.call_tool))
                slot.cache = on_success(slot.cache, entries, now=self._clock())
        if self._slots.get(config.id) is not slot:
            self._close(slot)  # removed or reconfigured meanwhile: drop what this attempt opened
            return
        if self._on_change is not None:
            try:
                self._on_change(config.id, list(slot.cache.tools))
            except Exception:  # isolation boundary: a subscriber bug must not break the catalog
                logger.exception("MCP catalog on_change failed for %r", config.id)

    async def _connect(self, slot: ServerSlot) -> McpConnection:
        connection = slot.connection
        if connection is not None and connection.usable:
            return connection
        self._close(slot)
        config = slot.config
        connection = McpConnection(config, on_tools_changed=lambda: self._tools_changed(slot))
        slot.connection = connection
        slot.connect_attempts += 1
        self._connecting += 1
        self.peak_connecting = max(self.peak_connecting, self._connecting)
        try:
            self._task_group().start_soon(connection.run, name=f"mcp:{config.id}")
            with anyio.move_on_after(self._connect_timeout_s):
                await connection.wait_ready()
        finally:
            self._connecting -= 1
        if connection.usable:
            return connection
        error = connection.error or (
            f"no answer to initialize within {self._connect_timeout_s:g} s"
        )
        connection.close()
        raise ToolError(f"MCP server {config.id!r}: {error}")

    def _close(self, slot: ServerSlot) -> None:
        if slot.connection is not None:
            slot.connection.close()
            slot.connection = None

    def _tools_changed(self, slot: ServerSlot) -> None:
        if self._slots.get(slot.config.id) is not slot or self._owned_group is None:
            return
        if slot.inflight is not None:
            slot.rerun = True
        else:
            self._start_refresh(slot)

    # -- entries and calls ------------------------------------------------------------------

    async def call_tool(
        self,
        server_id: str,
        tool_name: str,
        arguments: Mapping[str, Any],
        *,
        timeout_s: float | None = None,
    ) -> Any:
        """Call a tool on its server's connection, connecting first if there is none.

        A server inside its failure backoff is refused at once: a dead server never delays a
        turn. Failures and ``is_error`` results raise ``ToolError``.
        """
        result = await self.call_tool_result(server_id, tool_name, arguments, timeout_s=timeout_s)
        return call_result_value(result, what=f"MCP tool {tool_name!r} on {server_id!r}")

    async def call_tool_result(
        self,
        server_id: str,
        tool_name: str,
        arguments: Mapping[str, Any],
        *,
        timeout_s: float | None = None,
    ) -> types.CallToolResult:
        """``call_tool``, answering the server's own ``CallToolResult`` (``is_error`` included:
        the MCP proxy relays it as is). Connection failures raise ``ToolError``."""
        slot = self._slots.get(server_id)
        if slot is None:
            raise ToolError(f"unknown MCP server {server_id!r}")
        if not slot.config.active:
            raise ToolError(f"MCP server {server_id!r} is not active")
        timeout = self._call_timeout_s if timeout_s is None else timeout_s
        connection = slot.connection
        if connection is None or not connection.usable:
            cached, now = slot.cache, self._clock()
            if cached.state == "failed" and cached.retry_at is not None and now < cached.retry_at:
                raise ToolError(
                    f"MCP server {server_id!r} is unavailable ({cached.last_error}); "
                    f"next attempt in {cached.retry_at - now:.0f} s"
                )
            with anyio.move_on_after(timeout):
                await self.refresh(server_id)
            connection = slot.connection
            if connection is None or not connection.usable:
                raise ToolError(
                    f"MCP server {server_id!r} is unavailable ({slot.cache.last_error})"
                )
        result: types.CallToolResult = await connection.call_tool(
            tool_name, dict(arguments), timeout_s=timeout
        )
        return result

    # -- snapshots --------------------------------------------------------------------------

    def status(self) -> list[McpServerStatus]:
        """Per server: state, tool count, last error, backoff left, connect attempts."""
        now = self._clock()
        return [slot_status(slot, now) for slot in self._slots.values()]

    def statistics(self) -> dict[str, int]:
        """Counts by state, total cached tools and connect attempts."""
        return slots_statistics(self._slots.values())
