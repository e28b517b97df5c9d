"""``AgentSessionHost``: the thin shell around the session reducer (reference §6.3-§6.7).

One entry per session: the reducer's ``SessionState`` plus what the shell owns (``entry``).
Every decision is ``drupe.sessions.reducer.reduce``; the host feeds it events and performs its
effects (``effects``: chunks routed into turn streams, launches, closed connections, held
streams terminated). Its helpers receive what they use, never the host: ``turn_stream``,
``timers``, ``stopping``, ``runtime_requests``, ``connections``, ``launch``, ``agent_edits``.

Contract:
* ``is_busy`` comes from runtime state, never from "is a stream live"; ``will_continue`` is the
  stream manager's hold policy for ``agent-session:`` conversations.
* ``begin_turn`` registers a fresh turn and returns its listeners; the execution's source is
  ``open_turn_stream``, which connects (single-flight), sends the user input exactly once (never
  for a pre-admitted continuation), yields routed chunks and ends on the runtime's terminal.
  Its cancellation (Stop) closes the session's connection and drops the queue.
* Connections are never reconciled or closed under an admitted streaming turn or during a roll.
* Every task runs in the task group given at construction (the stream manager's).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, cast

import anyio
import anyio.abc

from drupe.chunks.types import Chunk
from drupe.errors import DriverError
from drupe.ids import session_id_of
from drupe.sessions.agent_edits import apply_agent_update
from drupe.sessions.connections import ConnectionKeeper
from drupe.sessions.drivers.base import (
    Capabilities,
    IdleHookDriver,
    SessionInfo,
)
from drupe.sessions.drivers.registry import DriverRegistry
from drupe.sessions.effects import perform
from drupe.sessions.entry import SessionEntry, touch_entry
from drupe.sessions.launch import Launcher
from drupe.sessions.listeners import turn_listeners
from drupe.sessions.lookup import SessionLookup
from drupe.sessions.reducer import reduce
from drupe.sessions.runtime_requests import (
    answer_approval,
    fetch_context_usage,
    redirect_or_queue,
    turn_started_by_runtime,
)
from drupe.sessions.seams import HostSteps
from drupe.sessions.session_events import (
    CompactionEnded,
    Event,
    RuntimeTerminal,
    TurnCreated,
    TurnTerminal,
)
from drupe.sessions.state import FollowUp, Transition, TurnExec, TurnInfo, is_busy, will_continue
from drupe.sessions.stopping import stop_session
from drupe.sessions.timers import SessionTimers
from drupe.sessions.turn_stream import note, turn_stream
from drupe.streaming.checkpoints import Checkpointer
from drupe.streaming.listeners.base import Listener
from drupe.streaming.manager import ExecutionSpec, SendInput, StreamManager

if TYPE_CHECKING:
    from drupe.persistence.agents import AgentStore
    from drupe.persistence.messages import MessageStore
    from drupe.persistence.records import TerminalStatus

__all__ = [
    "DEFAULT_IDLE_TTL",
    "MAX_ENTRIES",
    "MAX_TURN_CHANNEL",
    "AgentSessionHost",
    "SessionEntry",
]

log = logging.getLogger(__name__)

DEFAULT_IDLE_TTL = 300.0
MAX_TURN_CHANNEL = 65_536
"""Chunks routed to a turn's stream and not yet read by the stream manager; one more ends the
turn ``error`` and closes the runtime connection."""
MAX_ENTRIES = 10_000
"""Session entries kept in memory; past it the least recently used idle, disconnected entry is
forgotten (its state is persisted); when none is, a new session's turn is refused."""
DEFAULT_COMPACTION_BOUND = 600.0
"""Seconds a compaction may run before the host settles it as failed (nothing ended it)."""


class AgentSessionHost:
    """Runs agent-session turns through drivers; one per process."""

    def __init__(
        self,
        *,
        manager: StreamManager,
        drivers: DriverRegistry,
        agents: AgentStore,
        messages: MessageStore,
        task_group: anyio.abc.TaskGroup | None = None,
        idle_ttl: float = DEFAULT_IDLE_TTL,
        compaction_bound: float = DEFAULT_COMPACTION_BOUND,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        fence_for: Callable[[str], int | None] = lambda conversation_id: None,
        checkpointer: Checkpointer | None = None,
    ) -> None:
        self.manager = manager
        self.drivers = drivers
        self.agents = agents
        self.messages = messages
        self.lookup = SessionLookup(agents)
        self._tg = task_group
        self.idle_ttl = idle_ttl
        self.compaction_bound = compaction_bound
        self.fence_for = fence_for
        self.checkpointer = checkpointer
        """Saves each live answer into its ``pending`` row while it streams (None: off)."""
        """This node's fencing token for a conversation (cluster mode; None: unfenced): every
        session row the host (and its admission provider) writes carries it."""
        self.entries: dict[str, SessionEntry] = {}
        self.max_entries = MAX_ENTRIES
        self.turn_channel_limit = MAX_TURN_CHANNEL
        steps = HostSteps(
            apply=self.apply,
            is_current=self._is_current,
            spawn=self._spawn,
            settle_compaction=self.settle_compaction,
            runtime_failed=self.runtime_failed,
            runtime_turn_started=self.runtime_turn_started,
        )
        self.connections = ConnectionKeeper(steps, drivers=drivers, lookup=self.lookup)
        self.launcher = Launcher(
            steps,
            manager=manager,
            messages=messages,
            lookup=self.lookup,
            fence_for=fence_for,
            turn_request=self._turn_request,
        )
        self.timers = SessionTimers(spawn=self._spawn, sleep=sleep, apply=self.apply)
        self._seq = 0
        manager.add_hold_policy(self.will_continue_conversation)

    @property
    def task_group(self) -> anyio.abc.TaskGroup:
        return self._tg if self._tg is not None else self.manager.task_group

    def _spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        self.task_group.start_soon(fn, *args)

    def _is_current(self, entry: SessionEntry) -> bool:
        return self.entries.get(entry.session_id) is entry

    def _turn_request(self, entry: SessionEntry, turn: TurnInfo) -> SendInput:
        """What starts ``turn``'s stream: its execution and its runtime listeners."""
        return SendInput(
            conversation_id=entry.conversation_id,
            executions=[self.execution_spec(entry.session_id, turn)],
            listeners=self._listeners(entry, turn),
        )

    # --- queries ----------------------------------------------------------------------------

    def entry(self, session_id: str) -> SessionEntry | None:
        return self.entries.get(session_id)

    def is_busy(self, session_id: str) -> bool:
        entry = self.entries.get(session_id)
        return entry is not None and is_busy(entry.state)

    def will_continue_conversation(self, conversation_id: str) -> bool:
        session_id = session_id_of(conversation_id)
        entry = self.entries.get(session_id) if session_id else None
        return entry is not None and will_continue(entry.state)

    def resume_token(self, session_id: str) -> str | None:
        entry = self.entries.get(session_id)
        return entry.last_resume_token if entry is not None else None

    # --- turns ------------------------------------------------------------------------------

    def ensure_entry(self, info: SessionInfo) -> SessionEntry:
        """The session's entry (created for a new session), made the most recently used."""
        return touch_entry(self.entries, info, limit=self.max_entries)

    def begin_turn(self, info: SessionInfo, turn: TurnInfo) -> list[Listener]:
        """Register a fresh turn on an idle session; returns its runtime listeners."""
        entry = self.ensure_entry(info)
        self.apply(entry, TurnCreated(turn, "fresh"))
        current = entry.state.execution
        if not (isinstance(current, TurnExec) and current.turn is turn):
            raise DriverError(f"agent session {info.session_id!r} is busy")
        return self._listeners(entry, turn)

    def execution_spec(self, session_id: str, turn: TurnInfo) -> ExecutionSpec:
        return ExecutionSpec(
            model_id=turn.config.model_id,
            source=lambda: self.open_turn_stream(session_id, turn.turn_id),
            anchor_message_id=turn.assistant_message_id,
        )

    async def enqueue_user_message(
        self, info: SessionInfo, item: FollowUp, subscribers: Sequence[Listener] = ()
    ) -> Literal["redirected", "queued"]:
        """A follow-up on a busy session: redirect it into the live turn, or queue it.

        ``subscribers`` are parked for the next launched turn (pass them only when the
        conversation has no stream they could join now).
        """
        entry = self.ensure_entry(info)
        entry.waiting.extend(subscribers)
        self._seq += 1
        item = replace(item, seq=self._seq)
        return await redirect_or_queue(
            entry,
            item,
            connection=self.connections.current(entry),
            can_steer=self._capabilities(entry).steer,
            apply=self.apply,
        )

    def _capabilities(self, entry: SessionEntry) -> Capabilities:
        return self.drivers.get(entry.info.driver_type).capabilities

    async def refresh_context_usage(self, session_id: str) -> Mapping[str, Any] | None:
        """The session's context usage, fetched from its runtime at most once per ended turn
        (each fetch may cost the runtime provider requests), and only when someone reads it."""
        entry = self.entries.get(session_id)
        if entry is None:
            return None
        return await fetch_context_usage(
            entry,
            self.connections.current(entry),
            supported=self._capabilities(entry).context_usage,
        )

    def runtime_turn_started(self, entry: SessionEntry) -> None:
        """The runtime began a turn by itself: it gets its own assistant row (no user row),
        streamed and persisted like any turn. On a busy session it waits (buffered) and goes
        first once the session is idle; its row follows the answer the runtime gave before it
        (not a follow-up submitted meanwhile)."""
        turn_started_by_runtime(entry, apply=self.apply)

    def mark_turn_terminal(self, session_id: str, turn_id: str, status: TerminalStatus) -> None:
        entry = self.entries.get(session_id)
        if entry is not None:
            self.apply(entry, TurnTerminal(turn_id, status))

    def open_turn_stream(self, session_id: str, turn_id: str) -> AsyncIterator[Chunk]:
        """The chunk source of one session turn (the manager's ``ExecutionSpec.source``; see
        ``turn_stream.turn_stream``)."""
        return turn_stream(
            self.entries.get,
            session_id,
            turn_id,
            apply=self.apply,
            connections=self.connections,
            manager=self.manager,
            channel_limit=self.turn_channel_limit,
        )

    async def stop(self, session_id: str) -> bool:
        """Stop the session: abort its live turn (persisted ``paused``), drop its queue."""
        entry = self.entries.get(session_id)
        if entry is None:
            return False
        return await stop_session(
            entry, apply=self.apply, manager=self.manager, connections=self.connections
        )

    # --- runtime events ---------------------------------------------------------------------

    def apply(self, entry: SessionEntry, event: Event) -> None:
        """Feed the reducer one event and perform its effects (synchronously or as tasks)."""
        entry.state, effects = reduce(entry.state, event)
        perform(
            entry,
            effects,
            spawn=self._spawn,
            launcher=self.launcher,
            connections=self.connections,
            on_idle=self._on_idle,
        )
        self.timers.sync(entry, idle_ttl=self.idle_ttl, compaction_bound=self.compaction_bound)
        if entry.waiting and not is_busy(entry.state):
            error = {"name": "FollowUpDropped", "message": "the follow-up will not be answered"}
            self._spawn(self.launcher.fail_waiting, entry, error)
        entry.changed.set()
        entry.changed = anyio.Event()

    def current_turn(self, entry: SessionEntry) -> TurnExec | None:
        current = entry.state.execution
        return current if isinstance(current, TurnExec) else None

    def runtime_failed(self, entry: SessionEntry, error: Mapping[str, Any]) -> None:
        """The connection ended under a turn: the turn ends ``error``."""
        current = entry.state.execution
        if isinstance(current, TurnExec | Transition) and current.terminal is None:
            self.apply(entry, RuntimeTerminal("error", error))

    # --- turn listeners (``drupe.sessions.listeners``) -------------------------------------------

    def _listeners(self, entry: SessionEntry, turn: TurnInfo) -> list[Listener]:
        return turn_listeners(
            entry,
            turn,
            messages=self.messages,
            agents=self.agents,
            fence=self.fence_for(entry.conversation_id),
            checkpointer=self.checkpointer,
            report=self.mark_turn_terminal,
        )

    # --- agent edits (``drupe.sessions.agent_edits``) ------------------------------------------

    async def agent_updated(self, agent_id: str) -> None:
        """Push an agent edit to its live sessions (see ``agent_edits.apply_agent_update``)."""
        await apply_agent_update(
            list(self.entries.values()),
            agent_id,
            lookup=self.lookup,
            connections=self.connections,
            abort=self.manager.abort,
            runtime_failed=self.runtime_failed,
        )

    # --- approvals ----------------------------------------------------------------------------

    async def respond_approval(
        self, session_id: str, approval_id: str, *, approved: bool, reason: str | None = None
    ) -> bool:
        """Resolve an in-place approval the driver holds; a denial emits ``tool-output-denied``."""
        entry = self.entries.get(session_id)
        if entry is None:
            return False
        return await answer_approval(
            entry,
            self.connections.current(entry),
            approval_id,
            approved=approved,
            reason=reason,
            route_chunk=self.connections.route_chunk,
        )

    # --- compaction and idle (timers: ``drupe.sessions.timers``) ------------------------------

    def settle_compaction(self, entry: SessionEntry, reason: str) -> None:
        """End a compaction nothing else will end (the turn or the connection ended)."""
        if entry.state.compacting:
            note(entry, f"compaction settled: {reason}")
            self.apply(entry, CompactionEnded(None))

    async def _on_idle(self, entry: SessionEntry) -> None:
        driver = self.drivers.get(entry.info.driver_type)
        if not driver.capabilities.idle_hook or entry.last_resume_token is None:
            return
        try:
            await cast(IdleHookDriver, driver).on_session_idle(entry.session_id)
        except Exception:  # isolation boundary: a driver's idle hook
            log.exception("on_session_idle of session %r failed", entry.session_id)

    async def prime(self, session_id: str) -> bool:
        """Open the session's connection ahead of a turn (shares any in-flight connect)."""
        info = await self.lookup.load(session_id)
        if info is None or not info.model_id:
            return False
        entry = self.ensure_entry(info)
        await self.connections.ensure(entry, info.model_id)
        self.timers.sync_idle(entry, self.idle_ttl)
        return True

    async def forget(self, session_id: str) -> None:
        """A deleted session: stop it, close its connection, drop its entry."""
        entry = self.entries.get(session_id)
        if entry is None:
            return
        await self.stop(session_id)
        await self.connections.close_now(entry, "session deleted")
        for scope in (entry.idle_scope, entry.compaction_scope):
            if scope is not None:
                scope.cancel()
        entry.idle_scope = entry.compaction_scope = None
        if self.entries.get(session_id) is entry:
            del self.entries[session_id]

    async def aclose(self) -> None:
        """Close every connection (shutdown)."""
        for entry in list(self.entries.values()):
            await self.connections.close_now(entry, "shutdown")
