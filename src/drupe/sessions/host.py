"""``AgentSessionHost``: the thin shell around the session reducer (reference §6.3-§6.7).

One entry per session: the reducer's ``SessionState`` plus what the shell owns (the runtime
connection and its reader task, the open turn streams, the idle timer, the newest resume token).
Every decision is ``drupe.sessions.reducer.reduce``; this module feeds it events and performs
the effects: it routes chunks into turn streams, closes them, schedules launches (single-flight
per session, under the conversation lock), closes connections and terminates held streams.

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
from drupe.ids import new_message_id, next_turn_id, session_conversation_id, session_id_of
from drupe.sessions.agent_edits import apply_agent_update
from drupe.sessions.connections import ConnectionKeeper
from drupe.sessions.drivers.base import (
    Capabilities,
    ContextUsageConnection,
    IdleHookDriver,
    SessionInfo,
    SteerableConnection,
    UserInput,
)
from drupe.sessions.drivers.registry import DriverRegistry
from drupe.sessions.entry import SessionEntry, TurnItem, forgettable, runtime_turn_known
from drupe.sessions.launch import Launcher
from drupe.sessions.listeners import RuntimeTerminalListener, SessionBackend
from drupe.sessions.lookup import SessionLookup
from drupe.sessions.reducer import reduce
from drupe.sessions.seams import HostSteps
from drupe.sessions.state import (
    CloseConnection,
    CloseStream,
    CompactionEnded,
    DeliverBuffer,
    DropBuffer,
    DropQueued,
    Event,
    FollowUp,
    Forward,
    Idle,
    IdleExpired,
    LaunchTarget,
    LogInvalid,
    QueueFollowUp,
    RedirectAccepted,
    RuntimeTerminal,
    RuntimeTurnStarted,
    ScheduleLaunch,
    SessionOnIdle,
    SteerUndeliveredInputs,
    Stopped,
    TerminateHeld,
    Transition,
    TurnAdmitted,
    TurnCreated,
    TurnExec,
    TurnInfo,
    TurnStreamOpened,
    TurnTerminal,
    can_redirect,
    is_busy,
    turn_config,
    will_continue,
)
from drupe.streaming.checkpoints import Checkpointer
from drupe.streaming.listeners.base import Listener
from drupe.streaming.listeners.persistence import PersistenceListener
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
_STOP_ROLL_BOUND_S = 10.0
"""How long ``stop`` waits for a stopped roll's continuation to settle (then it aborts it)."""
_STOP_CLOSE_BOUND_S = 20.0
"""How long ``stop`` waits for the stopped runtime's connection to close."""
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
        self._sleep = sleep
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
        entry = self.entries.pop(info.session_id, None)
        if entry is not None:
            self.entries[info.session_id] = entry  # most recently used last
        else:
            self._make_room()
            entry = self.entries[info.session_id] = SessionEntry(
                session_id=info.session_id,
                conversation_id=session_conversation_id(info.session_id),
                info=info,
            )
        entry.info = info
        return entry

    def _make_room(self) -> None:
        """Keep ``entries`` within ``MAX_ENTRIES`` (see its docstring)."""
        while len(self.entries) >= self.max_entries:
            victim = next((e for e in self.entries.values() if forgettable(e)), None)
            if victim is None:
                raise DriverError(
                    f"too many active agent sessions (the limit is {self.max_entries})"
                )
            log.info("forgetting the idle session entry %r (entry limit)", victim.session_id)
            del self.entries[victim.session_id]

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
        turn_id = can_redirect(entry.state, item.config)
        connection = self.connections.current(entry)
        if turn_id is not None and connection is not None and self._capabilities(entry).steer:
            # Fold first: the runtime may reach the boundary before ``redirect`` returns.
            self.apply(entry, RedirectAccepted(turn_id, item))
            steerable = cast(SteerableConnection, connection)
            try:
                accepted = await steerable.redirect(
                    UserInput(message=item.message, system_reminder=True, headless=item.headless)
                )
            except Exception:  # isolation boundary: a driver failing to steer
                log.exception("redirect into session %r failed", entry.session_id)
                accepted = False
            if accepted:
                return "redirected"
            self.apply(entry, SteerUndeliveredInputs((item.user_message_id,)))
            return "queued"
        self.apply(entry, QueueFollowUp(item))
        return "queued"

    def _capabilities(self, entry: SessionEntry) -> Capabilities:
        return self.drivers.get(entry.info.driver_type).capabilities

    async def refresh_context_usage(self, session_id: str) -> Mapping[str, Any] | None:
        """The session's context usage, fetched from its runtime at most once per ended turn
        (each fetch may cost the runtime provider requests), and only when someone reads it."""
        entry = self.entries.get(session_id)
        if entry is None:
            return None
        connection = self.connections.current(entry)
        if (
            connection is None
            or entry.usage_fetched_at == entry.turns_ended
            or not self._capabilities(entry).context_usage
        ):
            return entry.context_usage
        async with entry.usage_lock:
            if entry.usage_fetched_at != entry.turns_ended:
                turns = entry.turns_ended
                usage = await cast(ContextUsageConnection, connection).context_usage()
                entry.usage_fetched_at = turns
                if usage is not None:
                    entry.context_usage = dict(usage)
        return entry.context_usage

    def runtime_turn_started(self, entry: SessionEntry) -> None:
        """The runtime began a turn by itself: it gets its own assistant row (no user row),
        streamed and persisted like any turn. On a busy session it waits (buffered) and goes
        first once the session is idle; its row follows the answer the runtime gave before it
        (not a follow-up submitted meanwhile)."""
        model_id = entry.info.model_id
        turn = TurnInfo(
            turn_id=next_turn_id(),
            assistant_message_id=new_message_id(),
            user_message_id="",
            config=turn_config(model_id),
            message={"id": "", "role": "user", "parts": []},
            pre_admitted=True,
            runtime=True,
        )
        previous = entry.state.waiting[-1] if entry.state.waiting else entry.state.execution
        if isinstance(previous, TurnExec):
            entry.runtime_parents[turn.turn_id] = previous.turn.assistant_message_id
        self.apply(entry, RuntimeTurnStarted(turn))
        for turn_id in [t for t in entry.runtime_parents if not runtime_turn_known(entry, t)]:
            del entry.runtime_parents[turn_id]  # refused, or dropped by a stop

    def mark_turn_terminal(self, session_id: str, turn_id: str, status: TerminalStatus) -> None:
        entry = self.entries.get(session_id)
        if entry is not None:
            self.apply(entry, TurnTerminal(turn_id, status))

    async def open_turn_stream(self, session_id: str, turn_id: str) -> AsyncIterator[Chunk]:
        """The chunk source of one session turn (the manager's ``ExecutionSpec.source``)."""
        entry = self.entries.get(session_id)
        current = entry.state.execution if entry is not None else None
        if entry is None or not (isinstance(current, TurnExec) and current.turn.turn_id == turn_id):
            raise DriverError(f"turn {turn_id!r} is not the current turn of {session_id!r}")
        turn = current.turn
        send, receive = anyio.create_memory_object_stream[TurnItem](self.turn_channel_limit)
        entry.channels[turn_id] = send
        send.send_nowait(("chunk", {"type": "start", "messageId": turn.assistant_message_id}))
        finished = False
        try:
            self.apply(entry, TurnStreamOpened(turn_id))
            if not turn.pre_admitted:
                connection = await self.connections.ensure(entry, turn.config.model_id)
                if self._admittable(entry, turn_id):
                    await connection.send(
                        UserInput(
                            message=turn.message,
                            system_reminder=turn.steer,
                            headless=turn.headless,
                        )
                    )
                    self.apply(entry, TurnAdmitted(turn_id))
            async with receive:
                async for item in receive:
                    if item[0] == "chunk":
                        yield item[1]
                        continue
                    finished = True
                    if item[1] == "error":
                        error = dict(item[2] or {})
                        raise DriverError(str(error.get("message") or "the agent runtime failed"))
                    if item[1] == "paused":
                        # The user stopped the session during the roll: this continuation
                        # delivered what was buffered and now ends as a user stop.
                        self.manager.abort(entry.conversation_id, "user-stop")
                        raise DriverError("the session was stopped")
                    return
            if turn_id in entry.overflowed:
                # The turn's stream fell MAX_TURN_CHANNEL chunks behind: end it visibly.
                finished = True
                entry.overflowed.discard(turn_id)
                await self.connections.close_now(entry, "turn stream overflow")
                limit = self.turn_channel_limit
                raise DriverError(f"the answer fell more than {limit} chunks behind; it was ended")
        except DriverError:
            finished = True
            raise
        finally:
            entry.channels.pop(turn_id, None)
            if not finished:
                with anyio.CancelScope(shield=True):
                    await self._stopped(entry)

    def _admittable(self, entry: SessionEntry, turn_id: str) -> bool:
        current = entry.state.execution
        return (
            isinstance(current, TurnExec)
            and current.turn.turn_id == turn_id
            and current.admission == "pending"
            and current.terminal is None
        )

    async def _stopped(self, entry: SessionEntry) -> None:
        keep = entry.keep_queue_on_stop
        entry.keep_queue_on_stop = False
        self.apply(entry, Stopped(keep_queue=keep))

    async def stop(self, session_id: str) -> bool:
        """Stop the session: abort its live turn (persisted ``paused``), drop its queue."""
        entry = self.entries.get(session_id)
        if entry is None:
            return False
        rolling = isinstance(entry.state.execution, Transition)
        if rolling:
            # Nothing is live during a roll (A1a ended, A2 not started): A2 is latched
            # ``paused``; it still gets its row with what was buffered (see the reducer).
            self.apply(entry, Stopped())
            # A2 ends by itself once it delivered the buffer; aborting it would lose that.
            with anyio.move_on_after(_STOP_ROLL_BOUND_S):
                while not isinstance(entry.state.execution, Idle):
                    await entry.changed.wait()
        aborted = False
        if not isinstance(entry.state.execution, Idle) or not rolling:
            aborted = await self.manager.abort_and_drain(entry.conversation_id)
        if not aborted and not rolling:
            self.apply(entry, Stopped())
        # Return only once the runtime is gone: a stopped CLI calls the model no more.
        with anyio.move_on_after(_STOP_CLOSE_BOUND_S):
            await self.connections.wait_closed(session_id)
        return aborted or rolling

    # --- runtime events ---------------------------------------------------------------------

    def apply(self, entry: SessionEntry, event: Event) -> None:
        """Feed the reducer one event and perform its effects (synchronously or as tasks)."""
        entry.state, effects = reduce(entry.state, event)
        for effect in effects:
            match effect:
                case Forward(turn_id=turn_id, chunk=chunk):
                    self._push(entry, turn_id, ("chunk", chunk))
                case DeliverBuffer(turn_id=turn_id, chunks=chunks):
                    for chunk in chunks:
                        self._push(entry, turn_id, ("chunk", chunk))
                case CloseStream(turn_id=turn_id, status=status, error=error):
                    self._push(entry, turn_id, ("end", status, error))
                case ScheduleLaunch(target=target):
                    self.task_group.start_soon(self._launch, entry, target)
                case TerminateHeld(error=error):
                    self.task_group.start_soon(self._terminate_held, entry, dict(error))
                case DropQueued(items=items, reason=reason):
                    ids = [i.user_message_id for i in items]
                    self._note(entry, f"dropped follow-ups {ids} ({reason})", _level(reason))
                case DropBuffer(chunks=chunks, reason=reason):
                    text = f"dropped {len(chunks)} chunk(s) ({reason})"
                    self._note(entry, text, _level(reason))
                case CloseConnection(reason=reason):
                    self.connections.close_current(entry, reason)
                case SessionOnIdle():
                    self.task_group.start_soon(self._on_idle, entry)
                case LogInvalid(event=name, reason=reason):
                    self._note(entry, f"invalid {name}: {reason}", logging.WARNING)
        self._sync_idle(entry)
        self._sync_compaction_bound(entry)
        if entry.waiting and not is_busy(entry.state):
            error = {"name": "FollowUpDropped", "message": "the follow-up will not be answered"}
            self.task_group.start_soon(self.launcher.fail_waiting, entry, error)
        entry.changed.set()
        entry.changed = anyio.Event()

    def _push(self, entry: SessionEntry, turn_id: str, item: TurnItem) -> None:
        channel = entry.channels.get(turn_id)
        if channel is None:
            text = f"turn {turn_id!r} has no open stream; {item[0]} dropped"
            self._note(entry, text, logging.WARNING)
            return
        try:
            channel.send_nowait(item)
        except anyio.WouldBlock:
            text = f"turn {turn_id!r} overflowed its stream; it ends in error"
            self._note(entry, text, logging.WARNING)
            entry.overflowed.add(turn_id)
            entry.channels.pop(turn_id, None)
            channel.close()

    def _note(self, entry: SessionEntry, text: str, level: int = logging.INFO) -> None:
        """Log ``text`` (anomalies at WARNING: they lose something) and keep it on the entry."""
        log.log(level, "session %r: %s", entry.session_id, text)
        entry.log.append(text)
        del entry.log[:-100]

    def current_turn(self, entry: SessionEntry) -> TurnExec | None:
        current = entry.state.execution
        return current if isinstance(current, TurnExec) else None

    def runtime_failed(self, entry: SessionEntry, error: Mapping[str, Any]) -> None:
        """The connection ended under a turn: the turn ends ``error``."""
        current = entry.state.execution
        if isinstance(current, TurnExec | Transition) and current.terminal is None:
            self.apply(entry, RuntimeTerminal("error", error))

    # --- launches (``drupe.sessions.launch``) --------------------------------------------------

    async def _launch(self, entry: SessionEntry, target: LaunchTarget) -> None:
        await self.launcher.launch(entry, target)

    async def _terminate_held(self, entry: SessionEntry, error: dict[str, Any]) -> None:
        await self.launcher.terminate_held(entry, error)

    def _listeners(self, entry: SessionEntry, turn: TurnInfo) -> list[Listener]:
        backend = SessionBackend(
            messages=self.messages,
            agents=self.agents,
            session_id=entry.session_id,
            message_id=turn.assistant_message_id,
            resume_token=lambda: entry.last_resume_token,
            fence=self.fence_for(entry.conversation_id),
        )
        return [
            PersistenceListener(
                backend,
                model_id=turn.config.model_id,
                conversation_id=entry.conversation_id,
                checkpointer=self.checkpointer,
            ),
            RuntimeTerminalListener(
                entry.session_id, turn.turn_id, backend=backend, report=self.mark_turn_terminal
            ),
        ]

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
        if entry is None or approval_id not in entry.approvals:
            return False
        connection = self.connections.current(entry)
        if connection is None:
            return False
        tool_call_id, _headless = entry.approvals.pop(approval_id)
        resolved = await connection.respond_approval(approval_id, approved=approved, reason=reason)
        if resolved and not approved:
            self.connections.route_chunk(
                entry, {"type": "tool-output-denied", "toolCallId": tool_call_id}
            )
        return resolved

    # --- compaction bound ----------------------------------------------------------------------

    def _sync_compaction_bound(self, entry: SessionEntry) -> None:
        compacting = entry.state.compacting
        if compacting and entry.compaction_scope is None:
            scope = entry.compaction_scope = anyio.CancelScope()
            self.task_group.start_soon(self._compaction_timer, entry, scope)
        elif not compacting and entry.compaction_scope is not None:
            entry.compaction_scope.cancel()
            entry.compaction_scope = None

    async def _compaction_timer(self, entry: SessionEntry, scope: anyio.CancelScope) -> None:
        with scope:
            await self._sleep(self.compaction_bound)
        if scope.cancel_called or entry.compaction_scope is not scope:
            return
        entry.compaction_scope = None
        self._note(entry, f"compaction did not end within {self.compaction_bound:.0f} s")
        self.apply(entry, CompactionEnded(None))

    def settle_compaction(self, entry: SessionEntry, reason: str) -> None:
        """End a compaction nothing else will end (the turn or the connection ended)."""
        if entry.state.compacting:
            self._note(entry, f"compaction settled: {reason}")
            self.apply(entry, CompactionEnded(None))

    # --- idle ---------------------------------------------------------------------------------

    def _sync_idle(self, entry: SessionEntry) -> None:
        idle = not is_busy(entry.state) and entry.state.connection == "connected"
        if idle and entry.idle_scope is None:
            scope = entry.idle_scope = anyio.CancelScope()
            self.task_group.start_soon(self._idle_timer, entry, scope)
        elif not idle and entry.idle_scope is not None:
            entry.idle_scope.cancel()
            entry.idle_scope = None

    async def _idle_timer(self, entry: SessionEntry, scope: anyio.CancelScope) -> None:
        with scope:
            await self._sleep(self.idle_ttl)
        if scope.cancel_called or entry.idle_scope is not scope:
            return
        entry.idle_scope = None
        self.apply(entry, IdleExpired())

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
        self._sync_idle(entry)
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


def _level(reason: str) -> int:
    """A drop the user asked for (a stop) is routine; any other drop loses something."""
    return logging.INFO if reason == "stopped" else logging.WARNING
