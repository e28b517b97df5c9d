"""``PromptResponse``: the raw ASGI response that serves one gateway stream in a dialect.

It starts the stream (the request is already validated) and decides when the HTTP response is
committed. Rules (reference §9, scenario 40):

* The status line and headers are sent only once a meaningful chunk arrived (text, reasoning,
  tool input, finish). Until then a failure is still a proper HTTP error: the dialect's error
  JSON with a 4xx/5xx status (502 upstream failure, 504 idle timeout or abort).
* After the commit a failure is a dialect error frame; a success terminator (``[DONE]``,
  ``message_stop``, ``response.completed``) is written only for a ``success`` terminal, never
  after an abort.
* The idle timeout counts seconds without any chunk; when it fires the stream is aborted
  (``idle-timeout``). A client disconnect aborts it (``client-disconnect``). Either way the
  model stops: the gateway never keeps a stream nobody reads (an agent-session stream only
  detaches: see ``drupe.gateway.agent_turns``).
* Frames waiting when the writer wakes are joined into one write (deps-lab §4).
* Before the last bytes of a response are written, the stream's terminal work is awaited
  (bounded) and the conversation is forgotten: gateway traffic leaves no status records behind,
  and a client that got its answer (or its 504) knows the model stream is over.
* ``before_success`` (optional) is awaited after a success terminal and before the success
  frames or body are produced (the Responses API stores its response there, so a client that
  saw ``response.completed`` can chain from it at once). ``on_end(TokenUsage)`` is called once
  with the input and output tokens the answer used (its largest ``message-metadata`` usage),
  whatever the outcome (zeros when the model reported none).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import orjson
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from drupe.chunks.types import Chunk
from drupe.errors import AdmissionError
from drupe.gateway.prompt import Dialect, GatewayError, GatewayFailure, GatewayStream
from drupe.persistence.gateway_usage_meter import TokenUsage
from drupe.streaming.listeners.base import TerminalResult

__all__ = ["MEANINGFUL_CHUNKS", "SSE_HEADERS", "PromptResponse", "failure_of_terminal"]

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
        on_end: Callable[[TokenUsage], None] | None = None,
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
        self.tokens = TokenUsage()
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
            used = TokenUsage(
                int(usage.get("inputTokens") or 0), int(usage.get("outputTokens") or 0)
            )
            if used.total > self.tokens.total:
                self.tokens = used

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
