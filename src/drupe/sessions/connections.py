"""``ConnectionKeeper``: a session's runtime connection, its reader, and ``ensure`` (§6.7).

* ``ensure`` is single-flight: concurrent callers share one in-flight connect. A connect first
  waits until every close of the session's earlier connections has finished (a session never
  has two runtimes, e.g. two CLI processes, at once). A cold connect passes the newest resume
  token (the in-memory one, else the persisted one). A live connection is reconciled against
  the wanted target, EXCEPT during a roll or under an admitted streaming turn (then it is
  returned as is). After every await the link's identity is re-checked, so a verdict about a
  connection that was replaced meanwhile is ignored. ``current``/``patched`` -> use it;
  ``rebuild``/``failed`` -> close and connect again; ``invalid`` -> close, raise.
* One reader task per connection translates runtime events into reducer events. If the runtime
  goes away by itself, a turn that was still running ends ``error``.
* Context usage and supported slash commands are kept on the entry (the REST session state)
  and, when they change, announced to the live turn as transient ``data-context-usage`` /
  ``data-session-commands`` chunks (dropped with a log when no turn is live).
* A compaction always ends: on its own end event, on the turn's terminal, when the connection
  ends, or after the host's ``compaction_bound`` (the session is never left ``compacting``).
Never: reconnect from the reader, or close a connection the host did not decide to close.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import anyio

from drupe.chunks.types import Chunk
from drupe.errors import DriverError, DrupeError
from drupe.observability.turn_spans import traceparent_for
from drupe.sessions.drivers.base import (
    ApiRetry,
    ChunkEvent,
    CompactionAnchor,
    CompactionComplete,
    CompactionError,
    CompactionStart,
    ConnectInput,
    Connection,
    ConnectTarget,
    ContextUsage,
    ErrorEvent,
    ResumeToken,
    RuntimeEvent,
    RuntimeTurnStart,
    SteerBoundary,
    SteerUndelivered,
    SupportedCommands,
    ToolApprovalRequest,
    TraceContext,
    TurnComplete,
    UsageEvent,
)
from drupe.sessions.session_events import (
    CompactionEnded,
    CompactionStarted,
    ConnectionLost,
    ConnectionOpened,
    ConnectionStarted,
    RuntimeChunk,
    RuntimeTerminal,
    SteerBoundaryReached,
    SteerUndeliveredInputs,
)
from drupe.sessions.state import Transition, TurnExec
from drupe.streaming.listeners.base import serialize_error

if TYPE_CHECKING:
    from drupe.sessions.drivers.registry import DriverRegistry
    from drupe.sessions.host import SessionEntry
    from drupe.sessions.lookup import SessionLookup
    from drupe.sessions.seams import HostSteps

__all__ = ["ConnectionKeeper", "anchor_chunk"]

log = logging.getLogger(__name__)

_MAX_ROUNDS = 8
_CLOSE_TIMEOUT = 10.0


@dataclass(eq=False, slots=True)
class _Link:
    connection: Connection
    attempt: int


def anchor_chunk(anchor: CompactionAnchor, seq: int) -> Chunk:
    """The ``data-compaction-anchor`` chunk injected into the live turn."""
    data: dict[str, Any] = {
        "trigger": anchor.trigger,
        "completedAt": anchor.completed_at,
        "preTokens": anchor.pre_tokens,
    }
    if anchor.post_tokens is not None:
        data["postTokens"] = anchor.post_tokens
    if anchor.duration_ms is not None:
        data["durationMs"] = anchor.duration_ms
    return {"type": "data-compaction-anchor", "id": f"compaction-{seq}", "data": data}


class ConnectionKeeper:
    def __init__(self, steps: HostSteps, *, drivers: DriverRegistry, lookup: SessionLookup) -> None:
        self.steps = steps
        self.drivers = drivers
        self.lookup = lookup
        self._links: dict[str, _Link] = {}
        self._connecting: dict[str, anyio.Event] = {}
        self._closing: dict[str, list[anyio.Event]] = {}
        """Closes in flight per session (a new connection waits for them: one runtime each)."""
        self._attempts = 0
        self._anchors = 0
        self.connects = 0

    def current(self, entry: SessionEntry) -> Connection | None:
        link = self._links.get(entry.session_id)
        return link.connection if link is not None else None

    # --- ensure -----------------------------------------------------------------------------

    async def ensure(self, entry: SessionEntry, model_id: str) -> Connection:
        """Return a connection fit for a turn with ``model_id`` (see the module contract)."""
        sid = entry.session_id
        for _ in range(_MAX_ROUNDS):
            if not self.steps.is_current(entry):
                raise DriverError(f"agent session {sid!r} was closed")
            link = self._links.get(sid)
            if link is not None:
                if _protected(entry):
                    return link.connection
                target = ConnectTarget.of(replace(entry.info, model_id=model_id))
                try:
                    verdict = await link.connection.reconcile(target)
                except Exception:  # isolation boundary: a throwing reconcile counts as failed
                    log.exception("reconcile of session %r raised", sid)
                    verdict = "failed"
                if self._links.get(sid) is not link:
                    continue  # replaced while we waited: decide again
                if verdict in ("current", "patched"):
                    return link.connection
                await self.close_now(entry, f"reconcile {verdict}")
                if verdict == "invalid":
                    raise DriverError(f"agent session {sid!r} is no longer valid")
                continue
            waiting = self._connecting.get(sid)
            if waiting is not None:
                await waiting.wait()
                continue
            await self._connect(entry, model_id)
        raise DriverError(f"could not connect agent session {sid!r}")

    async def _connect(self, entry: SessionEntry, model_id: str) -> None:
        sid = entry.session_id
        done = self._connecting[sid] = anyio.Event()
        self._attempts += 1
        attempt = self._attempts
        self.steps.apply(entry, ConnectionStarted(attempt))
        try:
            # Never two runtimes for one session: the previous one must have exited first.
            await self.wait_closed(sid)
            if entry.last_resume_token is None and not entry.token_hydrated:
                entry.last_resume_token = await self.lookup.latest_resume_token(sid)
            entry.token_hydrated = True
            driver = self.drivers.get(entry.info.driver_type)
            info = replace(entry.info, model_id=model_id)
            self.connects += 1
            connection = await driver.connect(
                ConnectInput(
                    session=info,
                    model_id=model_id,
                    resume_token=entry.last_resume_token,
                    trace=TraceContext(
                        conversation_id=entry.conversation_id,
                        traceparent=traceparent_for(entry.conversation_id),
                    ),
                )
            )
        except BaseException as err:
            self.steps.apply(entry, ConnectionLost(attempt))
            if isinstance(err, Exception) and not isinstance(err, DrupeError):
                raise DriverError(f"connecting agent session {sid!r} failed: {err}") from err
            raise
        finally:
            done.set()
            self._connecting.pop(sid, None)
        if not self.steps.is_current(entry) or entry.state.attempt != attempt:
            with anyio.move_on_after(_CLOSE_TIMEOUT, shield=True):
                await connection.close()
            return
        link = self._links[sid] = _Link(connection, attempt)
        self.steps.apply(entry, ConnectionOpened(attempt))
        self.steps.spawn(self._read, entry, link)

    # --- closing ----------------------------------------------------------------------------

    def close_current(self, entry: SessionEntry, reason: str) -> None:
        """Detach the connection now and close it in the background (a reducer effect)."""
        link = self._links.pop(entry.session_id, None)
        if link is not None:
            log.info("closing the connection of session %r (%s)", entry.session_id, reason)
            closed = self._closing_event(entry.session_id)
            self.steps.spawn(self._close_detached, entry, link, closed)

    async def _close_detached(self, entry: SessionEntry, link: _Link, closed: anyio.Event) -> None:
        try:
            await _close(link.connection)
        finally:
            self._closed(entry.session_id, closed)
        if entry.session_id not in self._links:
            self.steps.settle_compaction(entry, "the connection closed")

    async def close_now(self, entry: SessionEntry, reason: str) -> None:
        link = self._links.pop(entry.session_id, None)
        if link is None:
            return
        log.info("closing the connection of session %r (%s)", entry.session_id, reason)
        closed = self._closing_event(entry.session_id)
        self.steps.apply(entry, ConnectionLost(link.attempt))
        self.steps.settle_compaction(entry, "the connection closed")
        try:
            await _close(link.connection)
        finally:
            self._closed(entry.session_id, closed)

    def _closing_event(self, session_id: str) -> anyio.Event:
        """Mark a close in flight: no new connection of the session starts until it is done."""
        closed = anyio.Event()
        self._closing.setdefault(session_id, []).append(closed)
        return closed

    def _closed(self, session_id: str, closed: anyio.Event) -> None:
        closed.set()
        pending = [e for e in self._closing.get(session_id, ()) if e is not closed]
        if pending:
            self._closing[session_id] = pending
        else:
            self._closing.pop(session_id, None)

    async def wait_closed(self, session_id: str) -> None:
        """Wait until every close of the session's previous connections has finished."""
        while self._closing.get(session_id):
            await self._closing[session_id][0].wait()

    # --- reading ----------------------------------------------------------------------------

    async def _read(self, entry: SessionEntry, link: _Link) -> None:
        failure: Mapping[str, Any] = {
            "name": "RuntimeDisconnected",
            "message": "the agent runtime ended the connection",
        }
        try:
            async for event in link.connection.events():
                if self._links.get(entry.session_id) is not link:
                    break
                await self._on_event(entry, link, event)
        except Exception as err:  # isolation boundary: a driver's event stream failing
            log.exception("the event stream of session %r failed", entry.session_id)
            failure = serialize_error(err)
        finally:
            if self._links.get(entry.session_id) is link:
                del self._links[entry.session_id]
                self.steps.apply(entry, ConnectionLost(link.attempt))
                self.steps.settle_compaction(entry, "the connection ended")
                self.steps.runtime_failed(entry, failure)
                closed = self._closing_event(entry.session_id)
                try:
                    await _close(link.connection)
                finally:
                    self._closed(entry.session_id, closed)

    def route_chunk(self, entry: SessionEntry, chunk: Chunk) -> None:
        self.steps.apply(entry, RuntimeChunk(chunk))

    async def _on_event(self, entry: SessionEntry, link: _Link, event: RuntimeEvent) -> None:
        steps = self.steps
        match event:
            case ChunkEvent(chunk=runtime_chunk):
                steps.apply(entry, RuntimeChunk(runtime_chunk))
            case ResumeToken(token=token):
                entry.last_resume_token = token
                entry.token_hydrated = True
            case TurnComplete():
                entry.turns_ended += 1
                steps.settle_compaction(entry, "the turn ended")
                steps.apply(entry, RuntimeTerminal("success"))
            case ErrorEvent(error=error):
                entry.turns_ended += 1
                steps.settle_compaction(entry, "the turn failed")
                steps.apply(entry, RuntimeTerminal("error", dict(error)))
            case SteerUndelivered(inputs=inputs):
                steps.apply(entry, SteerUndeliveredInputs(tuple(i.message["id"] for i in inputs)))
            case SteerBoundary(inputs=inputs):
                steps.apply(entry, SteerBoundaryReached(tuple(i.message["id"] for i in inputs)))
            case CompactionStart():
                steps.apply(entry, CompactionStarted())
            case CompactionComplete(anchor=anchor):
                marker: Chunk | None = None
                if anchor is not None:
                    self._anchors += 1
                    marker = anchor_chunk(anchor, self._anchors)
                steps.apply(entry, CompactionEnded(marker))
            case CompactionError(error=error):
                log.warning("compaction of session %r failed: %s", entry.session_id, error)
                steps.apply(entry, CompactionEnded(None))
            case ContextUsage(usage=usage):
                if dict(usage) != entry.context_usage:
                    entry.context_usage = dict(usage)
                    self.route_chunk(entry, _state_chunk("data-context-usage", dict(usage)))
            case ToolApprovalRequest(request=request):
                await self._approval(entry, link, request.approval_id, request.tool_call_id)
            case SupportedCommands(commands=commands):
                if tuple(commands) != entry.commands:
                    entry.commands = tuple(commands)
                    data = {"commands": list(commands)}
                    self.route_chunk(entry, _state_chunk("data-session-commands", data))
            case RuntimeTurnStart():
                steps.runtime_turn_started(entry)
            case UsageEvent() | ApiRetry():
                pass

    async def _approval(
        self, entry: SessionEntry, link: _Link, approval_id: str, tool_call_id: str
    ) -> None:
        current = entry.state.execution
        headless = (isinstance(current, TurnExec) and current.turn.headless) or (
            isinstance(current, Transition) and current.headless
        )
        if headless:
            # Nobody can answer a headless turn: deny at once.
            await link.connection.respond_approval(
                approval_id, approved=False, reason="headless turn: nobody can approve"
            )
            self.route_chunk(entry, {"type": "tool-output-denied", "toolCallId": tool_call_id})
            return
        entry.approvals[approval_id] = (tool_call_id, False)
        self.route_chunk(
            entry,
            {
                "type": "tool-approval-request",
                "approvalId": approval_id,
                "toolCallId": tool_call_id,
            },
        )


def _state_chunk(kind: str, data: dict[str, Any]) -> Chunk:
    """A transient data chunk that tells subscribers the session's state changed (never
    stored in the message; the REST session state holds the newest value)."""
    return {"type": kind, "id": kind, "data": data, "transient": True}


def _protected(entry: SessionEntry) -> bool:
    """Never reconcile during a roll or under an admitted streaming turn."""
    current = entry.state.execution
    if isinstance(current, Transition):
        return True
    return (
        isinstance(current, TurnExec)
        and current.admission == "admitted"
        and current.phase == "open"
    )


async def _close(connection: Connection) -> None:
    with anyio.move_on_after(_CLOSE_TIMEOUT, shield=True):
        try:
            await connection.close()
        except Exception:  # isolation boundary: close must never raise, but a driver might
            log.exception("closing a runtime connection raised")
