"""One gateway request as a non-persisted prompt stream, and the seams its response uses.

Owns: ``PromptStream`` (start a caller-owned stream through the stream manager, conversation
``gateway:<uuid>``, ``persistent=False``, no persistence listener, one ``PromptListener``), the
``GatewayStream`` seam it and the agent-session stream (``drupe.gateway.agent_turns``)
implement, the ``Dialect`` seam the OpenAI, Anthropic and Responses adapters implement,
``GatewayFailure`` / ``GatewayError`` (an HTTP failure rendered in a dialect's error shape) and
``client_tool`` (a tool the client declared: advertised, never run). The ASGI response that
serves a stream is ``drupe.gateway.prompt_response.PromptResponse``.

Never: persist anything, log a request body, or keep a stream alive after its response ended.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio
import anyio.abc
import orjson
from starlette.responses import Response

from drupe.agent.request import TurnRequest
from drupe.chunks.types import Chunk, UIMessage
from drupe.errors import ToolError
from drupe.streaming.contracts import ExecutionSpec, SendInput
from drupe.streaming.listeners.base import BaseListener, StreamEvent, TerminalResult
from drupe.tools.base import ToolContext, ToolEntry

if TYPE_CHECKING:
    from drupe.app import Runtime

__all__ = [
    "Dialect",
    "ErrorBodyFn",
    "ErrorKind",
    "GatewayError",
    "GatewayFailure",
    "GatewayStream",
    "PromptListener",
    "PromptSpec",
    "PromptStream",
    "client_tool",
    "json_response",
]

ErrorKind = Literal[
    "invalid_request",
    "authentication",
    "forbidden",
    "not_found",
    "model_not_found",
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
        self._next_turn = False
        self._skip_turn: str | None = None
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

    def follow_next_turn(self, after_turn_id: str | None) -> None:
        """Follow the first execution that speaks in a turn other than ``after_turn_id``."""
        self._target = None
        self._skip_turn = after_turn_id
        self._next_turn = True

    def on_chunk(self, event: StreamEvent) -> None:
        target = self._target
        if target is None and self._next_turn and event.turn_id != self._skip_turn:
            target = self._target = (event.turn_id, event.execution_id)
        if target is not None and (event.turn_id, event.execution_id) != target:
            return
        if target is None and self._next_turn:
            return  # still the turn it came after
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

    @property
    def target(self) -> tuple[str, str] | None:
        """The ``(turn, execution)`` this listener follows (None: not chosen yet)."""
        return self._target

    def end_with(self, result: TerminalResult) -> None:
        """A terminal delivered synchronously (cluster mode's chunk-log follower)."""
        self._push(result)

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
