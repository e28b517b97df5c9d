"""McpCatalog against real MCP servers (official SDK) over stdio and streamable HTTP.

One good stdio server (2026-07-28 protocol) and one forced onto the legacy handshake are shared
by the module; dead and hanging servers are plain ``python -c`` children (no MCP import, cheap).
Backoff is driven by an injected clock, never by sleeping.
"""

from __future__ import annotations

import inspect
import socket
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.server.mcpserver import MCPServer

from drupe.errors import ToolError, UsageError
from drupe.tools.base import ToolContext, ToolEntry
from drupe.tools.deferral import plan_exposition
from drupe.tools.mcp.cache import EMPTY_TTL_S, FAILURE_BACKOFF_S
from drupe.tools.mcp.catalog import McpCatalog
from drupe.tools.mcp.config import McpServerConfig
from drupe.tools.meta import TOOL_INVOKE
from drupe.tools.registry import ToolRegistry
from drupe.tools.request import ToolRequest, prepare_tools

sys.path.insert(0, str(Path(__file__).parent / "mcp_servers"))
import demo_server

SERVER = str(Path(__file__).parent / "mcp_servers" / "demo_server.py")
GOOD = McpServerConfig(id="good", name="Good server", command=sys.executable, args=(SERVER,))
LEGACY = McpServerConfig(id="legacy", command=sys.executable, args=(SERVER,), protocol="legacy")
DEAD = McpServerConfig(id="dead", command=sys.executable, args=("-c", "raise SystemExit(3)"))
HANG_SOURCE = "import sys\nfor _ in sys.stdin:\n    pass\n"  # reads, never answers, exits at EOF
CONTEXT = ToolContext(conversation_id="c1", tool_call_id="call-1")


def _hang(server_id: str) -> McpServerConfig:
    return McpServerConfig(id=server_id, command=sys.executable, args=("-c", HANG_SOURCE))


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class Shared:
    def __init__(self, catalog: McpCatalog, changes: MemoryObjectReceiveStream[str]) -> None:
        self.catalog = catalog
        self.changes = changes
        self.first_lookup: list[ToolEntry] = []

    async def wait_for_tool(self, server_id: str, wire_name: str) -> None:
        with anyio.fail_after(10):
            while wire_name not in {e.name for e in self.catalog.list_tools(server_id)}:
                await self.changes.receive()


@pytest.fixture(scope="module")
async def shared() -> AsyncIterator[Shared]:
    send, receive = anyio.create_memory_object_stream[str](100)
    async with McpCatalog(
        [GOOD, LEGACY], on_change=lambda server_id, _tools: send.send_nowait(server_id)
    ) as catalog:
        state = Shared(catalog, receive)
        state.first_lookup = catalog.list_tools("good")  # never warmed: starts a refresh
        with anyio.fail_after(20):
            await catalog.prewarm()
        yield state


async def test_a_never_warmed_server_answers_empty_then_its_tools_appear(shared: Shared) -> None:
    assert shared.first_lookup == []
    catalog = shared.catalog
    entries = {e.name: e for e in catalog.list_tools("good")}
    assert {
        "mcp__good__add",
        "mcp__good__shout_text",
        "mcp__good__fail",
        "mcp__good__slow",
        "mcp__good__grow",
    } <= set(entries)
    add = entries["mcp__good__add"]
    assert add.description == "Add two integers."
    assert add.namespace == "mcp:good"
    assert add.defer == "auto" and add.needs_approval is None
    assert add.metadata["tool_name"] == "add"
    assert set(add.input_schema["properties"]) == {"a", "b"}
    # The prewarm joined the background refresh the first lookup started: one connect.
    status = {s.id: s for s in catalog.status()}
    assert status["good"].connect_attempts == 1
    assert status["good"].state == "connected"
    assert status["legacy"].state == "connected"


async def test_calls_return_results_and_errors(shared: Shared) -> None:
    entries = {e.name: e for e in shared.catalog.list_tools("good")}
    assert await entries["mcp__good__add"].execute({"a": 2, "b": 40}, CONTEXT) == {"result": 42}
    shouted = await entries["mcp__good__shout_text"].execute({"text": "hi"}, CONTEXT)
    assert shouted == {"result": "HI"}
    with pytest.raises(ToolError, match="boom from the server"):
        await entries["mcp__good__fail"].execute({}, CONTEXT)
    with pytest.raises(ToolError, match=r"timed out after 0\.2 s"):
        await shared.catalog.call_tool("good", "slow", {"seconds": 30}, timeout_s=0.2)
    # The connection survives a caller's timeout.
    assert await shared.catalog.call_tool("legacy", "add", {"a": 1, "b": 1}) == {"result": 2}


@pytest.mark.parametrize("server_id", ["good", "legacy"])
async def test_list_changed_refreshes_the_cache(shared: Shared, server_id: str) -> None:
    name = f"grown_{server_id}"
    assert await shared.catalog.call_tool(server_id, "grow", {"name": name}) == {"result": "grown"}
    wire = f"mcp__{server_id}__{name}"
    await shared.wait_for_tool(server_id, wire)
    grown = {e.name: e for e in shared.catalog.list_tools(server_id)}[wire]
    assert await grown.execute({}, CONTEXT) == {"result": f"I am {name}"}


async def test_sync_registry_and_status_snapshot(shared: Shared) -> None:
    registry = ToolRegistry()
    shared.catalog.sync_registry(registry, ["good"])
    assert "mcp__good__add" in registry
    assert registry.namespaces() == ["mcp:good"]
    snapshot = {s.id: s.as_dict() for s in shared.catalog.status()}
    assert snapshot["good"]["tool_count"] >= 5
    assert snapshot["good"]["last_error"] is None
    stats = shared.catalog.statistics()
    assert stats["servers"] == 2 and stats["connected"] == 2 and stats["tools"] >= 10


async def test_prepare_tools_reads_only_the_cache_so_a_dead_server_delays_no_turn(
    shared: Shared,
) -> None:
    catalog = shared.catalog
    registry = ToolRegistry()
    registry.register(
        ToolEntry(name="local_tool", description="a builtin", input_schema={}, execute=_local_tool)
    )
    catalog.configure(DEAD)
    try:
        # A plain function: preparing a turn's tools cannot wait for any server.
        assert not inspect.iscoroutinefunction(prepare_tools)
        request = ToolRequest(mcp_servers=["good", "dead"])
        names = [e.name for e in prepare_tools(registry, catalog, request).inline]
        assert names[0] == "local_tool" and "mcp__good__add" in names
        assert not any(name.startswith("mcp__dead__") for name in names)
        assert {s.id: s for s in catalog.status()}["dead"].refreshing  # warming in background

        only = ToolRequest(names=["mcp__good__add", "local_tool"], mcp_servers=["good", "dead"])
        chosen = [e.name for e in prepare_tools(registry, catalog, only).inline]
        assert chosen == ["local_tool", "mcp__good__add"]

        with anyio.fail_after(10):
            await catalog.refresh("dead")
        names = [e.name for e in prepare_tools(registry, catalog, request).inline]
        assert not any(name.startswith("mcp__dead__") for name in names)
        dead = {s.id: s for s in catalog.status()}["dead"]
        assert dead.state == "failed" and dead.connect_attempts == 1 and not dead.refreshing
    finally:
        catalog.remove("dead")


async def _local_tool(arguments: Mapping[str, Any], context: ToolContext) -> Any:
    return "local"


async def test_dead_and_hanging_servers_never_delay_a_caller() -> None:
    clock = FakeClock()
    async with McpCatalog([DEAD, _hang("hang")], clock=clock, connect_timeout_s=0.3) as catalog:
        # Cache-only: list_tools is a plain function, so it cannot wait for a server.
        assert not inspect.iscoroutinefunction(catalog.list_tools)
        with anyio.fail_after(1):
            for _ in range(100):
                assert catalog.list_tools("dead") == []
                assert catalog.list_tools("hang") == []
                await anyio.lowlevel.checkpoint()
        status = {s.id: s for s in catalog.status()}
        # The hanging server is still connecting; the dead one may already have exited (a fast
        # machine spawns and reaps it within the loop), which delays no caller either.
        assert status["hang"].state == "connecting"
        assert status["dead"].state in ("connecting", "failed")
        dead_already_failed = status["dead"].state == "failed"

        with anyio.fail_after(10):
            # 100 lookups made one single-flight attempt: the refresh joins it while it is in
            # flight; after it failed, the refresh is a new attempt.
            await catalog.refresh("dead")
            await catalog.refresh("hang")
        status = {s.id: s for s in catalog.status()}
        attempts = 2 if dead_already_failed else 1
        assert status["dead"].connect_attempts == attempts
        assert status["hang"].connect_attempts == 1
        assert status["dead"].state == "failed"
        assert "Connection closed" in (status["dead"].last_error or "")
        assert "no answer to initialize within 0.3 s" in (status["hang"].last_error or "")
        assert status["dead"].retry_in_s == FAILURE_BACKOFF_S

        # Inside the backoff: no new attempt, and a call is refused at once.
        clock.now += FAILURE_BACKOFF_S - 0.1
        assert catalog.list_tools("dead") == []
        assert {s.id: s for s in catalog.status()}["dead"].state == "failed"
        with anyio.fail_after(0.05), pytest.raises(ToolError, match="unavailable"):
            await catalog.call_tool("dead", "anything", {})

        # After the backoff the hot path starts exactly one background retry.
        clock.now += 0.1
        assert catalog.list_tools("dead") == []
        assert catalog.list_tools("dead") == []
        assert {s.id: s for s in catalog.status()}["dead"].state == "connecting"
        await anyio.lowlevel.checkpoint()
        # No await between this read and the refresh: if the retry already failed, the refresh
        # is one more attempt; if it is in flight, the refresh joins it.
        retry_done = {s.id: s for s in catalog.status()}["dead"].state == "failed"
        with anyio.fail_after(10):
            await catalog.refresh("dead")
        status = {s.id: s for s in catalog.status()}
        assert status["dead"].connect_attempts == attempts + (2 if retry_done else 1)
        assert status["dead"].state == "failed"


async def test_a_server_that_dies_mid_session_is_reconnected_on_the_next_call() -> None:
    async with McpCatalog([GOOD]) as catalog:
        with anyio.fail_after(20):
            await catalog.refresh("good")
            with pytest.raises(ToolError, match="Connection closed"):
                await catalog.call_tool("good", "die", {})
            status = catalog.status()[0]
            assert status.state == "disconnected"
            assert "Connection closed" in (status.last_error or "")
            assert await catalog.call_tool("good", "add", {"a": 1, "b": 2}) == {"result": 3}
        status = catalog.status()[0]
        assert status.state == "connected" and status.connect_attempts == 2


async def test_prewarm_connects_three_at_a_time() -> None:
    servers = [_hang(f"hang{i}") for i in range(5)]
    async with McpCatalog(servers, connect_timeout_s=0.1) as catalog:
        with anyio.fail_after(10):
            await catalog.prewarm()
        assert catalog.peak_connecting == 3
        assert catalog.statistics()["failed"] == 5


async def test_inactive_servers_and_unknown_ids() -> None:
    inactive = McpServerConfig(id="off", command=sys.executable, active=False)
    async with McpCatalog([inactive]) as catalog:
        assert catalog.list_tools("off") == []
        assert catalog.list_tools("nope") == []
        assert catalog.status()[0].state == "inactive"
        assert catalog.statistics()["connect_attempts"] == 0
        with pytest.raises(ToolError, match="not active"):
            await catalog.call_tool("off", "x", {})
        with pytest.raises(UsageError):
            await catalog.refresh("nope")
    with pytest.raises(UsageError, match="must be entered"):
        await McpCatalog([GOOD]).refresh("good")


@asynccontextmanager
async def serving_http(server: MCPServer) -> AsyncIterator[str]:
    """Serve ``server`` over streamable HTTP on a loopback socket bound before serving."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    app = server.streamable_http_app()
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(web.serve, [sock])
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            web.should_exit = True


async def test_a_confirmed_empty_server_is_not_asked_again_for_five_minutes() -> None:
    clock = FakeClock()
    async with serving_http(MCPServer("empty")) as url:
        config = McpServerConfig(id="empty", transport="http", url=url)
        async with McpCatalog([config], clock=clock) as catalog:
            with anyio.fail_after(10):
                assert await catalog.refresh("empty") == []
            assert catalog.status()[0].refreshes == 1
            clock.now += EMPTY_TTL_S - 1
            assert catalog.list_tools("empty") == []
            assert catalog.status()[0].refreshing is False
            clock.now += 1
            assert catalog.list_tools("empty") == []
            assert catalog.list_tools("empty") == []
            assert catalog.status()[0].refreshing is True
            with anyio.fail_after(10):
                await catalog.refresh("empty")
            status = catalog.status()[0]
            assert status.refreshes == 2
            assert status.connect_attempts == 1  # the live connection was reused


async def test_streamable_http_server_with_forced_approval() -> None:
    """Scenario 25 with a real MCP tool: approval-gated, never deferred, refused by tool_invoke."""
    async with serving_http(demo_server.build()) as url:
        config = McpServerConfig(id="remote", transport="http", url=url, require_approval=True)
        async with McpCatalog([config]) as catalog:
            with anyio.fail_after(10):
                tools = await catalog.refresh("remote")
            gated = {e.name: e for e in tools}
            add = gated["mcp__remote__add"]
            assert add.defer == "never" and add.is_approval_gated({"a": 1, "b": 2})
            # Once approved, the loop calls it directly and it works over HTTP.
            assert await add.execute({"a": 20, "b": 22}, CONTEXT) == {"result": 42}

            heavy = [
                ToolEntry(
                    name=f"heavy_{i}",
                    description="x" * 3_000,
                    input_schema={"type": "object"},
                    execute=add.execute,
                )
                for i in range(5)
            ]
            exposition = plan_exposition([*tools, *heavy], context_window=None)
            assert [e.name for e in exposition.deferred] == [e.name for e in heavy]
            assert set(gated) <= {e.name for e in exposition.inline}
            invoke = {e.name: e for e in exposition.meta}[TOOL_INVOKE]
            with pytest.raises(ToolError, match="needs human approval"):
                await invoke.execute(
                    {"name": "mcp__remote__add", "arguments": {"a": 1, "b": 2}}, CONTEXT
                )
            with pytest.raises(ToolError, match="not available in this request"):
                await invoke.execute({"name": "mcp__good__add", "arguments": {}}, CONTEXT)
