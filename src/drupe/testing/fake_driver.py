"""``FakeDriver`` / ``FakeConnection``: a scriptable agent runtime for tests, demos and benches.

A test plays the runtime: it waits for what the host sent (``wait_sends``), then emits runtime
events (``emit``, ``emit_text``, ``complete``, ``fail``). It controls ``redirect``'s answer,
``reconcile``'s verdict, and can hold ``connect`` at a gate to prove that concurrent opens share
one connect. ``steerable=False`` hands out connections without ``redirect`` (no steering).
``on_session_idle`` prewarms a connection parked under a settings signature; the next
``connect`` consumes it at most once, and only when the signature matches (volatile settings
such as a rotated ``api_key`` are ignored), else the park is closed.

It is a VERIFIED fake: ``drupe.testing.driver_check.check_driver`` passes on it, as on the real
drivers. It holds no host logic and never sleeps.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import orjson

from drupe.chunks.types import Chunk
from drupe.errors import DriverError, ValidationError
from drupe.sessions.drivers.base import (
    ApprovalRequest,
    Capabilities,
    ChunkEvent,
    ConnectInput,
    ConnectTarget,
    ErrorEvent,
    ReconcileVerdict,
    RuntimeEvent,
    SessionInfo,
    SteerBoundary,
    SteerUndelivered,
    ToolApprovalRequest,
    TurnComplete,
    UserInput,
)

__all__ = [
    "VOLATILE_SETTINGS",
    "FakeConnection",
    "FakeDriver",
    "SteerableFakeConnection",
    "settings_signature",
    "text_turn",
]

VOLATILE_SETTINGS = frozenset(("api_key", "abort_controller", "credentials_rotation"))
_ids = itertools.count(1)


def settings_signature(connect_input: ConnectInput) -> str:
    """A stable hash of what a warm connection depends on.

    Volatile settings (rotated keys, abort handles) and the resume token (a warm connection
    resumes the session's newest one) are left out.
    """
    session = connect_input.session
    settings = {k: v for k, v in session.settings.items() if k not in VOLATILE_SETTINGS}
    document = {
        "model": connect_input.model_id,
        "target": repr(ConnectTarget.of(session)),
        "settings": settings,
    }
    return hashlib.sha256(orjson.dumps(document, option=orjson.OPT_SORT_KEYS)).hexdigest()


def text_turn(message_id: str, words: Sequence[str], *, part: str = "t1") -> list[Chunk]:
    """The chunks of a one-step text answer."""
    return [
        {"type": "start", "messageId": message_id},
        {"type": "start-step"},
        {"type": "text-start", "id": part},
        *({"type": "text-delta", "id": part, "delta": w} for w in words),
        {"type": "text-end", "id": part},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop"},
    ]


@dataclass(eq=False)
class FakeConnection:
    """One fake runtime link. Emit events with ``emit``; observe ``sends``/``closed``."""

    connect_input: ConnectInput
    verdict: ReconcileVerdict = "current"
    script: list[list[RuntimeEvent]] = field(default_factory=list)
    """Event lists emitted on each ``send`` (popped in order); empty: the test emits by hand."""
    sends: list[UserInput] = field(default_factory=list)
    redirects: list[UserInput] = field(default_factory=list)
    reconciles: list[ConnectTarget] = field(default_factory=list)
    approvals: dict[str, tuple[bool, str | None] | None] = field(default_factory=dict)
    closed: anyio.Event = field(default_factory=anyio.Event)
    close_calls: int = 0
    consumed: int = 0
    emitted: int = 0
    """How many events the host's reader finished handling."""
    number: int = field(default_factory=lambda: next(_ids))
    on_send: Callable[[FakeConnection, UserInput], None] | None = None
    driver: FakeDriver | None = None

    def __post_init__(self) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[RuntimeEvent | None](math.inf)
        self._changed = anyio.Event()

    # --- the Connection protocol ----------------------------------------------------------

    async def events(self) -> AsyncIterator[RuntimeEvent]:
        async with self._receive:
            async for event in self._receive:
                if event is None:
                    return
                yield event
                # The reader asked for the next event: it finished handling this one.
                self.consumed += 1
                self._notify()

    async def send(self, user_input: UserInput) -> None:
        if self.closed.is_set():
            raise DriverError("the fake connection is closed")
        self.sends.append(user_input)
        if self.on_send is not None:
            self.on_send(self, user_input)
        self._notify()
        if self.script:
            for event in self.script.pop(0):
                self.emit(event)

    async def context_usage(self) -> dict[str, Any] | None:
        """The driver's scripted ``context_usage`` (counted in ``context_usage_calls``)."""
        if self.driver is None:
            return None
        self.driver.context_usage_calls += 1
        return self.driver.context_usage

    async def reconcile(self, target: ConnectTarget) -> ReconcileVerdict:
        self.reconciles.append(target)
        if self.verdict == "current" and target.model_id != self.connect_input.model_id:
            return "rebuild"
        return self.verdict

    async def respond_approval(
        self, approval_id: str, *, approved: bool, reason: str | None = None
    ) -> bool:
        if approval_id not in self.approvals or self.approvals[approval_id] is not None:
            return False
        self.approvals[approval_id] = (approved, reason)
        self._notify()
        return True

    async def close(self) -> None:
        self.close_calls += 1
        if not self.closed.is_set():
            self.closed.set()
            self._send.send_nowait(None)
            self._send.close()
        self._notify()

    # --- scripting --------------------------------------------------------------------------

    def crash(self) -> None:
        """The runtime dies: ``events()`` ends without the host having closed the link."""
        self._send.send_nowait(None)

    def emit(self, *events: RuntimeEvent) -> None:
        """Queue runtime events for the host's reader (dropped once closed)."""
        for event in events:
            if self.closed.is_set():
                return
            self.emitted += 1
            self._send.send_nowait(event)

    def emit_chunks(self, chunks: Sequence[Chunk]) -> None:
        self.emit(*(ChunkEvent(chunk) for chunk in chunks))

    def emit_text(self, message_id: str, words: Sequence[str], *, complete: bool = True) -> None:
        self.emit_chunks(text_turn(message_id, words))
        if complete:
            self.complete()

    def complete(self) -> None:
        self.emit(TurnComplete())

    def fail(self, message: str = "the runtime failed") -> None:
        self.emit(ErrorEvent({"name": "RuntimeError", "message": message}))

    def boundary(self, *inputs: UserInput) -> None:
        self.emit(SteerBoundary(tuple(inputs or self.redirects)))

    def undelivered(self, *inputs: UserInput) -> None:
        self.emit(SteerUndelivered(tuple(inputs or self.redirects)))

    def request_approval(self, approval_id: str, tool_call_id: str, tool_name: str) -> None:
        self.approvals[approval_id] = None
        request = ApprovalRequest(
            approval_id=approval_id, tool_call_id=tool_call_id, tool_name=tool_name, input={}
        )
        self.emit(ToolApprovalRequest(request))

    async def wait_sends(self, count: int = 1) -> UserInput:
        """Wait until ``count`` inputs were sent; returns the last one."""
        while len(self.sends) < count:
            await self._wait_change()
        return self.sends[count - 1]

    async def wait_consumed(self) -> None:
        """Wait until the reader handled every event emitted so far."""
        while self.consumed < self.emitted and not self.closed.is_set():
            await self._wait_change()

    async def wait_redirects(self, count: int = 1) -> UserInput:
        while len(self.redirects) < count:
            await self._wait_change()
        return self.redirects[count - 1]

    async def wait_approval(self, approval_id: str) -> tuple[bool, str | None]:
        while self.approvals.get(approval_id) is None:
            await self._wait_change()
        decision = self.approvals[approval_id]
        assert decision is not None
        return decision

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def _wait_change(self) -> None:
        await self._changed.wait()


@dataclass(eq=False)
class SteerableFakeConnection(FakeConnection):
    """A fake connection with ``redirect`` (the steering capability)."""

    redirect_result: bool = True

    async def redirect(self, user_input: UserInput) -> bool:
        if not self.redirect_result or self.closed.is_set():
            return False
        self.redirects.append(user_input)
        self._notify()
        return True


class FakeDriver:
    """A driver whose connections the test scripts. ``type`` defaults to ``"fake"``."""

    def __init__(
        self,
        type: str = "fake",
        *,
        steerable: bool = True,
        require_workspace: bool = False,
        headless_runs: bool = True,
    ) -> None:
        self.type = type
        self.headless_runs = headless_runs
        """Whether scheduled tasks and heartbeats may run on this runtime."""
        self.steerable = steerable
        self.context_usage: dict[str, Any] | None = None
        """What the connections' ``context_usage()`` answers (each call is counted)."""
        self.context_usage_calls = 0
        self.require_workspace = require_workspace
        self.connect_inputs: list[ConnectInput] = []
        self.connections: list[FakeConnection] = []
        self.gate: anyio.Event | None = None
        """When set, ``connect`` waits for it (to hold concurrent opens in flight)."""
        self.fail_connect: Exception | None = None
        self.verdict: ReconcileVerdict = "current"
        self.redirect_result = True
        self.script: list[list[RuntimeEvent]] = []
        self.prewarm_on_idle = False
        self.idle_calls: list[str] = []
        self.parked: dict[str, tuple[str, FakeConnection]] = {}
        self.consumed: list[FakeConnection] = []
        self.sent: list[tuple[FakeConnection, UserInput]] = []
        self._last_input: dict[str, ConnectInput] = {}
        self._changed = anyio.Event()

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            steer=self.steerable,
            context_usage=True,
            headless_runs=self.headless_runs,
            idle_hook=True,
        )

    @property
    def connects(self) -> int:
        """How many times ``connect`` was entered."""
        return len(self.connect_inputs)

    @property
    def last(self) -> FakeConnection:
        return self.connections[-1]

    def validate_session(self, session: SessionInfo) -> None:
        if self.require_workspace and (session.workspace is None or not session.workspace.is_dir()):
            raise ValidationError(f"the workspace of session {session.session_id!r} is missing")

    async def connect(self, connect_input: ConnectInput) -> FakeConnection:
        self.connect_inputs.append(connect_input)
        self._notify()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_connect is not None:
            raise self.fail_connect
        session_id = connect_input.session.session_id
        self._last_input[session_id] = connect_input
        parked = self.parked.pop(session_id, None)
        if parked is not None:
            signature, warm = parked
            if signature == settings_signature(connect_input):
                self.consumed.append(warm)
                return warm
            await warm.close()
        connection = self._new(connect_input)
        return connection

    async def on_session_idle(self, session_id: str) -> None:
        self.idle_calls.append(session_id)
        self._notify()
        last = self._last_input.get(session_id)
        if not self.prewarm_on_idle or last is None:
            return
        warm_input = replace(last, trace=None)
        previous = self.parked.pop(session_id, None)
        if previous is not None:
            await previous[1].close()
        self.parked[session_id] = (settings_signature(warm_input), self._new(warm_input))

    def _new(self, connect_input: ConnectInput) -> FakeConnection:
        kind: type[FakeConnection] = SteerableFakeConnection if self.steerable else FakeConnection
        connection = kind(
            connect_input, verdict=self.verdict, script=list(self.script), on_send=self._sent
        )
        connection.driver = self
        if isinstance(connection, SteerableFakeConnection):
            connection.redirect_result = self.redirect_result
        self.connections.append(connection)
        self._notify()
        return connection

    def _sent(self, connection: FakeConnection, user_input: UserInput) -> None:
        self.sent.append((connection, user_input))
        self._notify()

    async def wait_sent(self, count: int = 1) -> FakeConnection:
        """Wait until ``count`` inputs were sent over all connections; returns the last's."""
        while len(self.sent) < count:
            await self._wait_change()
        return self.sent[count - 1][0]

    async def wait_connects(self, count: int = 1) -> None:
        while self.connects < count:
            await self._wait_change()

    async def wait_connections(self, count: int = 1) -> FakeConnection:
        while len(self.connections) < count:
            await self._wait_change()
        return self.connections[count - 1]

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def _wait_change(self) -> None:
        await self._changed.wait()

    def describe(self) -> dict[str, Any]:
        return {"type": self.type, "connects": self.connects, "parked": sorted(self.parked)}
