"""``McpConnection``: one MCP client session, owned by exactly one task.

``run()`` is the owning task: it enters the SDK's ``Client`` (stdio or streamable HTTP), serves
requests that other tasks post through a bounded memory stream, and exits the session in the same
task. The session is never lent out: callers use ``list_tools`` / ``call_tool``, which post a
request and wait for the reply under a timeout taken at the call site. The owner serves each
request in a child task of its own task group, so one slow tool call does not block a listing.

A ``tools/list_changed`` notification (the 2026-07-28 ``subscriptions/listen`` stream when the
server speaks it, the classic notification otherwise) calls ``on_tools_changed``; that callback
must not block (the catalog only schedules a refresh).

States: ``connecting`` -> ``connected`` -> ``closed``, or ``connecting``/``connected`` ->
``failed`` with ``error`` set. ``run`` never raises for a server's failure; ``close()`` cancels it.
This module decides nothing about caching or backoff (see ``drupe.tools.mcp.catalog``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import SubscriptionLost
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from drupe.errors import ToolError
from drupe.tools.mcp.config import McpServerConfig

__all__ = ["ConnectionState", "McpConnection", "describe_error"]

logger = logging.getLogger(__name__)

ConnectionState = Literal["connecting", "connected", "failed", "closed"]
_Operation: TypeAlias = Callable[[Client], Awaitable[Any]]
_REQUEST_BUFFER = 64
_LISTEN_ACK_TIMEOUT_S = 5.0
_MAX_LIST_PAGES = 100


@dataclass(slots=True)
class _Outcome:
    value: Any = None
    error: BaseException | None = None


@dataclass(slots=True)
class _Request:
    operation: _Operation
    timeout_s: float
    reply: MemoryObjectSendStream[_Outcome]


def describe_error(exc: BaseException) -> str:
    """A one-line description; single-member exception groups are unwrapped."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        text = exc.message
    elif isinstance(exc, TimeoutError):
        text = "timed out"
    else:
        text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


def _is_connection_lost(exc: BaseException) -> bool:
    if isinstance(exc, MCPError):
        return exc.code == types.CONNECTION_CLOSED
    return isinstance(
        exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)
    )


def _is_tools_changed(message: object) -> bool:
    return isinstance(message, types.ToolListChangedNotification)


class McpConnection:
    """One live MCP session and the task that owns it."""

    def __init__(
        self,
        config: McpServerConfig,
        *,
        on_tools_changed: Callable[[], None] | None = None,
        client_name: str = "drupe",
    ) -> None:
        self.config = config
        self._on_tools_changed = on_tools_changed
        self._client_name = client_name
        self._state: ConnectionState = "connecting"
        self._error: str | None = None
        self._ready = anyio.Event()
        self._finished = anyio.Event()
        self._scope = anyio.CancelScope()
        self._listening = False
        self._requests_send, self._requests_receive = anyio.create_memory_object_stream[_Request](
            _REQUEST_BUFFER
        )

    @property
    def state(self) -> ConnectionState:
        return self._state

    @property
    def error(self) -> str | None:
        return self._error

    @property
    def usable(self) -> bool:
        return self._state == "connected"

    async def wait_ready(self) -> None:
        """Return once the session is connected, or the connection has failed or closed."""
        await self._ready.wait()

    async def wait_finished(self) -> None:
        await self._finished.wait()

    def close(self) -> None:
        """Ask the owning task to exit the session (it runs the SDK's shielded cleanup)."""
        if self._state in ("connecting", "connected"):
            self._state = "closed"
        self._scope.cancel()

    # -- the owning task ------------------------------------------------------------------

    async def run(self) -> None:
        """Own the session until ``close()`` or a failure; never raises for the server's faults."""
        try:
            with self._scope:
                await self._serve_session()
        except Exception as exc:  # isolation boundary: a broken server is a state
            self._fail(exc)
        finally:
            if self._state in ("connecting", "connected"):
                self._state = "closed"
            self._requests_send.close()
            self._drain_pending()
            self._ready.set()
            self._finished.set()

    def _fail(self, exc: BaseException) -> None:
        if self._state in ("connecting", "connected"):  # the first failure is the one reported
            self._state = "failed"
            self._error = describe_error(exc)
            logger.info("MCP server %r failed: %s", self.config.id, self._error)

    def _lose(self, exc: BaseException) -> None:
        """The session is gone (server exited, stream dropped): fail and end the owner."""
        self._fail(exc)
        self._scope.cancel()

    def _drain_pending(self) -> None:
        receive = self._requests_receive
        while True:
            try:
                request = receive.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                break
            request.reply.close()
        receive.close()

    async def _enter_client(self, stack: AsyncExitStack) -> Client:
        config = self.config
        target: Any
        if config.transport == "stdio":
            assert config.command is not None
            target = StdioServerParameters(
                command=config.command,
                args=list(config.args),
                env=dict(config.env) or None,
                cwd=config.cwd,
            )
        else:
            assert config.url is not None
            http_client = await stack.enter_async_context(
                create_mcp_http_client(headers=dict(config.headers) or None)
            )
            target = streamable_http_client(config.url, http_client=http_client)
        client = Client(
            target,
            message_handler=self._handle_message,
            client_info=types.Implementation(name=self._client_name, version="1"),
            cache=None,
            mode=config.protocol,
        )
        return await stack.enter_async_context(client)

    async def _serve_session(self) -> None:
        async with AsyncExitStack() as stack:
            client = await self._enter_client(stack)
            async with anyio.create_task_group() as tg:
                acked = anyio.Event()
                tg.start_soon(self._listen, client, acked)
                with anyio.move_on_after(_LISTEN_ACK_TIMEOUT_S):
                    await acked.wait()
                self._state = "connected"
                self._ready.set()
                # Ends when ``run`` closes the send side; requests still buffered when the
                # owner is cancelled are answered "closed" by ``_drain_pending``.
                async for request in self._requests_receive:
                    tg.start_soon(self._serve_request, client, request)
                tg.cancel_scope.cancel()

    async def _listen(self, client: Client, acked: anyio.Event) -> None:
        """Hold a ``subscriptions/listen`` stream open (2026-07-28 servers) and relay changes."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                self._listening = True
                acked.set()
                async for _event in subscription:
                    self._tools_changed()
        except SubscriptionLost as exc:  # the stream dropped: changes would go unseen
            self._lose(exc)
        except Exception as exc:  # a legacy server: its classic notifications are used instead
            logger.debug("MCP server %r: no listen stream (%s)", self.config.id, exc)
        finally:
            self._listening = False
            acked.set()

    async def _handle_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            logger.debug("MCP server %r sent an error: %s", self.config.id, message)
        elif _is_tools_changed(message) and not self._listening:
            self._tools_changed()
        await anyio.lowlevel.checkpoint()

    def _tools_changed(self) -> None:
        if self._on_tools_changed is None:
            return
        try:
            self._on_tools_changed()
        except Exception:  # isolation boundary: a callback bug must not kill the session
            logger.exception("MCP server %r: on_tools_changed failed", self.config.id)

    async def _serve_request(self, client: Client, request: _Request) -> None:
        with request.reply:
            outcome = _Outcome()
            try:
                with anyio.fail_after(request.timeout_s):
                    outcome.value = await request.operation(client)
            except Exception as exc:  # the error is the caller's to see
                outcome.error = exc
                if _is_connection_lost(exc):
                    self._lose(exc)
            # A caller that gave up (its own timeout) closed its end: nothing to deliver.
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.WouldBlock):
                request.reply.send_nowait(outcome)

    # -- what other tasks call ------------------------------------------------------------

    async def _request(self, operation: _Operation, what: str, timeout_s: float) -> Any:
        server = self.config.id
        if self._state != "connected":
            raise ToolError(f"MCP server {server!r} is not connected ({self._state})")
        reply_send, reply_receive = anyio.create_memory_object_stream[_Outcome](1)
        try:
            with reply_receive, anyio.fail_after(timeout_s):
                try:
                    await self._requests_send.send(_Request(operation, timeout_s, reply_send))
                except BaseException:
                    reply_send.close()  # never enqueued: the owner will not close it
                    raise
                outcome = await reply_receive.receive()
        except TimeoutError:
            raise ToolError(
                f"MCP server {server!r}: {what} timed out after {timeout_s:g} s"
            ) from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
            raise ToolError(f"MCP server {server!r}: connection closed during {what}") from None
        if outcome.error is not None:
            if isinstance(outcome.error, ToolError):
                raise outcome.error
            raise ToolError(
                f"MCP server {server!r}: {what} failed: {describe_error(outcome.error)}"
            ) from outcome.error
        return outcome.value

    async def list_tools(self, *, timeout_s: float) -> list[types.Tool]:
        """Every tool the server lists (all pages)."""

        async def operation(client: Client) -> list[types.Tool]:
            tools: list[types.Tool] = []
            cursor: str | None = None
            for _ in range(_MAX_LIST_PAGES):
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
            return tools

        result: list[types.Tool] = await self._request(operation, "tools/list", timeout_s)
        return result

    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, timeout_s: float
    ) -> types.CallToolResult:
        """Call ``name``; the timeout bounds the whole round trip at the call site."""

        async def operation(client: Client) -> Any:
            return await client.call_tool(name, arguments)

        result = await self._request(operation, f"tools/call {name!r}", timeout_s)
        if not isinstance(result, types.CallToolResult):
            raise ToolError(
                f"MCP server {self.config.id!r}: tools/call {name!r} returned "
                f"{type(result).__name__}, not a tool result"
            )
        return result
