"""One gateway request as a non-persisted prompt stream, and the ASGI response that serves it.

Owns: ``PromptStream`` (start a caller-owned stream through the stream manager, conversation
``gateway:<uuid>``, ``persistent=False``, no persistence listener, one ``PromptListener``), the
``GatewayStream`` seam it and the agent-session stream (``drupe.gateway.agent_turns``)
implement, the ``Dialect`` seam the OpenAI, Anthropic and Responses adapters implement,
``GatewayFailure`` / ``GatewayError`` (an HTTP failure rendered in a dialect's error shape),
and ``PromptResponse``, the raw ASGI response that decides when the HTTP response is committed.

Rules (reference §9, scenario 40):

* The status line and headers are sent only once a meaningful chunk arrived (text, reasoning,
  tool input, finish). Until then a failure is still a proper HTTP error: the dialect's error
  JSON with a 4xx/5xx status (502 upstream failure, 504 idle timeout or abort).
* After the commit a failure is a dialect error frame; a success terminator (``[DONE]``,
  ``message_stop``) is written only for a ``success`` terminal, never after an abort.
* The idle timeout counts seconds without any chunk; when it fires the stream is aborted
  (``idle-timeout``). A client disconnect aborts it (``client-disconnect``). Either way the
  model stops: the gateway never keeps a stream nobody reads.
* Frames waiting when the writer wakes are joined into one write (deps-lab §4).
* Before the last bytes of a response are written, the stream's terminal work is awaited
  (bounded) and the conversation is forgotten: gateway traffic leaves no status records behind,
  and a client that got its answer (or its 504) knows the model stream is over.
* ``before_success`` (optional) is awaited after a success terminal and before the success
  frames or body are produced (the Responses API stores its response there, so a client that
  saw ``response.completed`` can chain from it at once). ``on_end(tokens)`` is called once with
  the tokens the answer used (from its ``message-metadata`` usage), whatever the outcome.

Never: persist anything, log a request body, or keep a stream alive after its response ended.
"""

from __future__ import annotations

import logging
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio
import anyio.abc
import orjson
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from drupe.agent.request import TurnRequest
from drupe.chunks.types import Chunk, UIMessage
from drupe.errors import AdmissionError, ToolError
from drupe.streaming.listeners.base import BaseListener, StreamEvent, TerminalResult
from drupe.streaming.manager import ExecutionSpec, SendInput
from drupe.tools.base import ToolContext, ToolEntry

if TYPE_CHECKING:
    from drupe.app import Runtime

__all__ = [
    "MEANINGFUL_CHUNKS",
    "SSE_HEADERS",
    "Dialect",
    "ErrorBodyFn",
    "ErrorKind",
    "GatewayError",
    "GatewayFailure",
    "GatewayStream",
    "PromptListener",
    "PromptResponse",
    "PromptSpec",
    "PromptStream",
    "client_tool",
    "failure_of_terminal",
    "json_response",
]

log = logging.getLogger(__name__)

MEANINGFUL_CHUNKS = frozenset(
    (
        "text-delta",
        "reasoning-delta",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
        "finish",
    )
)
"""Chunk types that commit a streaming response (reference §9: the first semantic chunk)."""

SSE_HEADERS: Mapping[str, str] = {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    "x-accel-buffering": "no",
}

ErrorKind = Literal[
    "invalid_request",
    "authentication",
    "forbidden",
    "not_found",
    "conflict",
    "too_large",
    "rate_limit",
    "upstream",
    "timeout",
    "aborted",
    "internal",
    "unavailable",
]

_MAX_QUEUED = 50_000
"""Chunks a prompt listener holds before it gives up on a client that does not read."""
_CLOSE_BOUND = 5.0


@dataclass(frozen=True, slots=True)
class GatewayFailure:
    """An HTTP failure before its dialect rendering: status, kind and a human message."""

    status: int
    kind: ErrorKind
    message: str


def json_response(
    status: int, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
) -> Response:
    return Response(
        orjson.dumps(body), status_code=status, media_type="application/json", headers=headers
    )


ErrorBodyFn = Callable[[GatewayFailure], dict[str, Any]]
"""A dialect's error body: ``GatewayFailure`` -> the JSON the client gets."""


class GatewayError(Exception):
    """Raised by gateway routes and dependencies; rendered with the dialect's error body."""

    def __init__(
        self,
        failure: GatewayFailure,
        error_body: Callable[[GatewayFailure], dict[str, Any]],
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(failure.message)
        self.failure = failure
        self.error_body = error_body
        self.headers = headers

    def response(self) -> Response:
        return json_response(
            self.failure.status, self.error_body(self.failure), headers=self.headers
        )


class Dialect(Protocol):
    """A wire dialect: UI chunks in, frames or one response body out (one per request)."""

    def feed(self, chunk: Chunk) -> list[bytes]:
        """Fold one UI chunk into the reply; return the SSE frames it produces (maybe none)."""

    def finish(self) -> list[bytes]:
        """The frames that end a successful stream (``[DONE]``, ``message_stop``)."""

    def body(self) -> dict[str, Any]:
        """The non-streaming success body, from everything fed so far."""

    def error_body(self, failure: GatewayFailure) -> dict[str, Any]:
        """The dialect's error JSON for an uncommitted failure."""

    def error_frame(self, failure: GatewayFailure) -> bytes:
        """The dialect's in-stream error frame for a committed failure."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptSpec:
    """What one gateway request asks the agent loop: model, history, tools, settings."""

    model_id: str
    messages: Sequence[UIMessage]
    system: str | None = None
    tools: Sequence[ToolEntry] = ()
    model_settings: Mapping[str, Any] | None = None


Item = Chunk | TerminalResult


class PromptListener(BaseListener):
    """Queues the stream's chunks and terminal for one response; never blocks the producer.

    With ``follow(turn_id, execution_id)`` it takes only that execution's chunks and terminal
    (an agent session's stream carries later turns too); until then it takes everything.
    """

    def __init__(self, listener_id: str, *, max_queued: int = _MAX_QUEUED) -> None:
        super().__init__(listener_id)
        self._items: deque[Item] = deque()
        self._wakeup: anyio.Event | None = None
        self._max_queued = max_queued
        self._target: tuple[str, str] | None = None
        self.overflowed = False
        self.closed = False

    def follow(self, turn_id: str, execution_id: str) -> None:
        self._target = (turn_id, execution_id)
        self._items = deque(
            item
            for item in self._items
            if not isinstance(item, TerminalResult)
            or (item.turn_id, item.execution_id) == self._target
        )

    def on_chunk(self, event: StreamEvent) -> None:
        target = self._target
        if target is not None and (event.turn_id, event.execution_id) != target:
            return
        if len(self._items) >= self._max_queued:
            self.overflowed = True
        else:
            self._items.append(event.chunk)
        self._wake()

    async def on_done(self, result: TerminalResult) -> None:
        self._push(result)

    async def on_paused(self, result: TerminalResult) -> None:
        self._push(result)

    async def on_error(self, result: TerminalResult) -> None:
        self._push(result)

    def is_alive(self) -> bool:
        return not self.closed

    def _push(self, result: TerminalResult) -> None:
        target = self._target
        if target is not None and (result.turn_id, result.execution_id) != target:
            return
        self._items.append(result)
        self._wake()

    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    async def take(self, idle: float) -> list[Item] | None:
        """Everything queued, waiting up to ``idle`` s for the first item; None: idle."""
        if not self._items:
            self._wakeup = anyio.Event()
            with anyio.move_on_after(idle):
                await self._wakeup.wait()
            self._wakeup = None
            if not self._items and not self.overflowed:
                return None
        items = list(self._items)
        self._items.clear()
        return items


class GatewayStream(Protocol):
    """What a ``PromptResponse`` serves: a started stream, read through its listener."""

    conversation_id: str
    listener: PromptListener

    async def start(self) -> None:
        """Start (or join) the stream; raises ``GatewayError`` or ``AdmissionError``."""

    def abort(self, reason: str) -> bool:
        """The response ends early (client gone, idle, slow client): stop or detach."""

    async def close(self) -> None:
        """The response is ending: settle (bounded) and drop what the request left behind."""


class PromptStream:
    """A caller-owned, non-persisted stream of one gateway request."""

    def __init__(self, runtime: Runtime, spec: PromptSpec) -> None:
        self.runtime = runtime
        self.spec = spec
        token = uuid.uuid4().hex
        self.conversation_id = f"gateway:{token}"
        self.listener = PromptListener(f"gateway:{token}")

    async def start(self) -> None:
        """Start the stream in the manager (raises ``AdmissionError`` at shutdown)."""
        spec = self.spec
        request = TurnRequest(
            conversation_id=self.conversation_id,
            message_id=f"msg_{uuid.uuid4().hex[:24]}",
            model_id=spec.model_id,
            messages=list(spec.messages),
            system=spec.system,
            tools=tuple(spec.tools),
            model_settings=spec.model_settings,
        )
        agent = self.runtime.agent
        self.runtime.manager.send(
            SendInput(
                conversation_id=self.conversation_id,
                executions=[
                    ExecutionSpec(model_id=spec.model_id, source=lambda: agent.stream(request))
                ],
                listeners=[self.listener],
                persistent=False,
                grace_period=0,  # the caller owns the stream: nothing to attach to afterwards
            )
        )

    def abort(self, reason: str) -> bool:
        return self.runtime.manager.abort(self.conversation_id, reason)

    async def close(self) -> None:
        """Wait (bounded) for the terminal work, then drop every trace of the conversation."""
        manager = self.runtime.manager
        with anyio.move_on_after(_CLOSE_BOUND, shield=True):
            await manager.wait_settled(self.conversation_id)
        manager.forget(self.conversation_id)


def failure_of_terminal(result: TerminalResult) -> GatewayFailure:
    """How a non-success terminal is reported (504 for a stop, 4xx/5xx for an error)."""
    if result.status == "paused":
        reason = result.reason or "aborted"
        if reason == "idle-timeout":
            return GatewayFailure(504, "timeout", "the model stream went idle and was stopped")
        return GatewayFailure(504, "aborted", f"the model stream was stopped ({reason})")
    error = result.error or {}
    message = str(error.get("message") or "the model failed")
    upstream = error.get("statusCode")
    if isinstance(upstream, int):
        if upstream == 429:
            return GatewayFailure(429, "rate_limit", message)
        if upstream in (400, 413, 422):
            return GatewayFailure(400, "invalid_request", message)
        return GatewayFailure(502, "upstream", message)
    if error.get("name") == "ProviderError":
        return GatewayFailure(502, "upstream", message)
    return GatewayFailure(500, "internal", message)


class PromptResponse(Response):
    """The ASGI response of one gateway request: it starts the stream (the request is already
    validated) and commits the HTTP response on the first meaningful chunk.

    A ``Response`` subclass only so that FastAPI hands it to the server as-is; none of the
    base class's body or header machinery is used.
    """

    def __init__(
        self,
        stream: GatewayStream,
        dialect: Dialect,
        *,
        streaming: bool,
        idle_timeout: float,
        before_success: Callable[[], Awaitable[None]] | None = None,
        on_end: Callable[[int], None] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.stream = stream
        self.dialect = dialect
        self.streaming = streaming
        self.idle_timeout = idle_timeout
        self.before_success = before_success
        self.on_end = on_end
        self.extra_headers = dict(headers or {})
        self.committed = False
        self.disconnected = False
        self.tokens = 0
        self._send: Send | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._send = send
        try:
            await self._run(receive)
        finally:
            if self.on_end is not None:
                self.on_end(self.tokens)

    async def _run(self, receive: Receive) -> None:
        try:
            await self.stream.start()
        except AdmissionError as err:
            failure = GatewayFailure(503, "unavailable", str(err))
            await self._json(503, self.dialect.error_body(failure))
            return
        except GatewayError as err:
            await self._json(err.failure.status, self.dialect.error_body(err.failure), err.headers)
            return
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch_disconnect, receive, tg.cancel_scope)
                # The writer runs as a task of its own: each chunk's wake-up then resumes a
                # short stack instead of every middleware frame the request came through.
                tg.start_soon(self._write, tg.cancel_scope)
        finally:
            # A no-op after a normal end; otherwise (disconnect, cancellation, a bug in a
            # dialect) the model must not go on for a response nobody will read.
            self.stream.abort("client-disconnect" if self.disconnected else "response-closed")
            await self.stream.close()

    # --- the disconnect watcher ---------------------------------------------------------------

    async def _watch_disconnect(self, receive: Receive, scope: anyio.CancelScope) -> None:
        while True:
            message: Message = await receive()
            if message["type"] == "http.disconnect":
                self._client_gone()
                scope.cancel()
                return

    def _client_gone(self) -> None:
        if not self.disconnected:
            self.disconnected = True
            self.stream.abort("client-disconnect")

    # --- serving ------------------------------------------------------------------------------

    async def _write(self, scope: anyio.CancelScope) -> None:
        try:
            await self._serve()
        except OSError:
            self._client_gone()
        scope.cancel()

    async def _serve(self) -> None:
        listener = self.stream.listener
        dialect = self.dialect
        pending: list[bytes] = []
        while True:
            items = await listener.take(self.idle_timeout)
            if items is None:
                self.stream.abort("idle-timeout")
                await self.stream.close()
                idle = f"{self.idle_timeout:g}"
                message = f"the model produced no output for {idle} s; the stream was stopped"
                await self._fail(GatewayFailure(504, "timeout", message), pending)
                return
            commit = False
            for item in items:
                if isinstance(item, TerminalResult):
                    if commit and not self.committed:
                        await self._start(200, SSE_HEADERS)  # meaningful chunks came first
                    await self._terminal(item, pending)
                    return
                if item.get("type") == "message-metadata":
                    self._count_tokens(item)
                frames = dialect.feed(item)
                if self.streaming:
                    pending.extend(frames)
                    if not self.committed and item.get("type") in MEANINGFUL_CHUNKS:
                        commit = True
            if listener.overflowed:
                self.stream.abort("slow-client")
                await self.stream.close()
                failure = GatewayFailure(504, "aborted", "the client did not read the stream")
                await self._fail(failure, pending)
                return
            if commit:
                await self._start(200, SSE_HEADERS)
            if self.committed and pending:
                await self._body(b"".join(pending), more=True)
                pending.clear()

    def _count_tokens(self, chunk: Chunk) -> None:
        metadata = chunk.get("messageMetadata")
        usage = metadata.get("usage") if isinstance(metadata, dict) else None
        if isinstance(usage, dict):
            used = int(usage.get("inputTokens") or 0) + int(usage.get("outputTokens") or 0)
            self.tokens = max(self.tokens, used)

    async def _terminal(self, result: TerminalResult, pending: list[bytes]) -> None:
        await self.stream.close()  # settled and forgotten before the client hears the end
        if result.status == "success":
            if self.before_success is not None:
                await self.before_success()
            if not self.streaming:
                await self._json(200, self.dialect.body())
                return
            pending.extend(self.dialect.finish())
            if not self.committed:
                await self._start(200, SSE_HEADERS)
            await self._body(b"".join(pending), more=False)
            return
        if result.reason == "client-disconnect":
            return
        await self._fail(failure_of_terminal(result), pending)

    async def _fail(self, failure: GatewayFailure, pending: list[bytes]) -> None:
        if self.committed:
            pending.append(self.dialect.error_frame(failure))
            await self._body(b"".join(pending), more=False)
            return
        log.info(
            "gateway stream %s failed before commit: %d %s",
            self.stream.conversation_id,
            failure.status,
            failure.kind,
        )
        await self._json(failure.status, self.dialect.error_body(failure))

    async def _json(
        self, status: int, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> None:
        data = orjson.dumps(body)
        await self._start(
            status,
            {
                **(headers or {}),
                "content-type": "application/json",
                "content-length": str(len(data)),
            },
        )
        await self._body(data, more=False)

    async def _start(self, status: int, headers: Mapping[str, str]) -> None:
        assert self._send is not None
        self.committed = True
        merged = {**self.extra_headers, **headers}
        raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in merged.items()]
        await self._send({"type": "http.response.start", "status": status, "headers": raw})

    async def _body(self, data: bytes, *, more: bool) -> None:
        assert self._send is not None
        await self._send({"type": "http.response.body", "body": data, "more_body": more})


def client_tool(name: str, description: str, schema: Mapping[str, Any]) -> ToolEntry:
    """A tool the client declared: the model may call it, Drupe never runs it.

    It is approval-gated for every input, so the agent loop ends the turn after the step that
    calls it (finish reason ``tool-calls``) with the call's input streamed; the caller runs the
    tool and sends its result back in the next request's history.
    """

    async def never_run(arguments: Mapping[str, Any], context: ToolContext) -> Any:
        raise ToolError(f"{name!r} is a client tool; the gateway never runs it")

    return ToolEntry(
        name=name,
        description=description,
        input_schema=dict(schema) if schema else {"type": "object", "properties": {}},
        execute=never_run,
        namespace="client",
        defer="never",
        needs_approval=lambda arguments: True,
    )
