"""``Launcher``: starts the host's runtime-driven turns (reference §6.4 ``startNextTurn``, §6.5).

Two targets, one launch at a time per session (the reducer's ``launch`` state), each under the
conversation's admission lock so it never interleaves with a dispatch:

* ``queued-turn``: re-read the agent (no model -> ``LaunchFailed(clear_queue)``: the held stream
  is terminated with an error, the queue cleared, no placeholder written), save a ``pending``
  row under the follow-up's user row, create the turn, ``start_runtime_turn``;
* ``steer-continuation``: save A2's ``pending`` row under the steer row U2, create A2
  pre-admitted (it never sends), ``start_runtime_turn`` (subscribers are carried);
* ``runtime-turn``: a turn the runtime started by itself: save its ``pending`` assistant row
  under the conversation's newest message (no user row), confirm it, ``start_runtime_turn``
  (pre-admitted: nothing is sent; its chunks were buffered meanwhile).

A failure reports ``LaunchFailed`` to the reducer, which decides what is dropped. A turn that
could not be started after its row was saved gets the row marked ``error``. Every row write
carries ``host.fence_for(conversation)`` (cluster mode; None on one node).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio

from drupe.ids import new_message_id, next_turn_id
from drupe.sessions.state import (
    LaunchAbandoned,
    LaunchFailed,
    LaunchStarted,
    LaunchTarget,
    Transition,
    TurnCreated,
    TurnExec,
    TurnInfo,
    TurnTerminal,
    turn_config,
)
from drupe.streaming.listeners.base import Listener, TerminalResult, serialize_error
from drupe.streaming.manager import SendInput

if TYPE_CHECKING:
    from drupe.sessions.host import AgentSessionHost, SessionEntry

__all__ = ["Launcher"]

log = logging.getLogger(__name__)


class Launcher:
    def __init__(self, host: AgentSessionHost) -> None:
        self.host = host

    async def launch(self, entry: SessionEntry, target: LaunchTarget) -> None:
        async with self.host.manager.conversation_lock(entry.conversation_id):
            state = entry.state
            if self.host.entries.get(entry.session_id) is not entry or not (
                state.launch == "scheduled" and state.launch_target == target
            ):
                return
            self.host.apply(entry, LaunchStarted(target))
            try:
                if target == "queued-turn":
                    await self._launch_queued(entry)
                elif target == "runtime-turn":
                    await self._launch_runtime_turn(entry)
                else:
                    await self._launch_continuation(entry)
            except Exception as err:  # isolation boundary: a launch failing (DB, driver)
                log.exception("launch %s of session %r failed", target, entry.session_id)
                self.host.apply(entry, LaunchFailed(target, clear_queue=False, error=_error(err)))

    async def _launch_queued(self, entry: SessionEntry) -> None:
        head = entry.state.queue[0]
        info = await self.host.lookup.load(entry.session_id)
        if not entry.state.queue or entry.state.queue[0] is not head:
            self.host.apply(entry, LaunchAbandoned("queued-turn"))
            return
        if info is None or not info.model_id:
            error = {"name": "AgentModelMissing", "message": "the agent has no model any more"}
            self.host.apply(entry, LaunchFailed("queued-turn", clear_queue=True, error=error))
            return
        entry.info = info
        message_id = new_message_id()
        await self.host.messages.create_placeholder(
            entry.conversation_id,
            message_id=message_id,
            parent_id=head.user_message_id,
            model_id=info.model_id,
            fence=self.host.fence_for(entry.conversation_id),
        )
        turn = TurnInfo(
            turn_id=next_turn_id(),
            assistant_message_id=message_id,
            user_message_id=head.user_message_id,
            config=turn_config(info.model_id),
            message=head.message,
            headless=head.headless,
            steer=head.steer,
        )
        self.host.apply(entry, TurnCreated(turn, "queued-turn"))
        await self._start(entry, turn)

    async def _launch_continuation(self, entry: SessionEntry) -> None:
        transition = entry.state.execution
        assert isinstance(transition, Transition)
        steer = transition.inputs[-1]
        source = transition.source
        message_id = new_message_id()
        await self.host.messages.create_placeholder(
            entry.conversation_id,
            message_id=message_id,
            parent_id=steer.user_message_id,
            model_id=source.config.model_id,
            fence=self.host.fence_for(entry.conversation_id),
        )
        turn = TurnInfo(
            turn_id=next_turn_id(),
            assistant_message_id=message_id,
            user_message_id=steer.user_message_id,
            config=source.config,
            message=steer.message,
            headless=transition.headless,
            pre_admitted=True,
            steer=True,
        )
        self.host.apply(entry, TurnCreated(turn, "steer-continuation"))
        await self._start(entry, turn)

    async def _launch_runtime_turn(self, entry: SessionEntry) -> None:
        current = entry.state.execution
        assert isinstance(current, TurnExec) and current.turn.runtime
        turn = current.turn
        parent = entry.runtime_parents.pop(turn.turn_id, None)
        if parent is None:
            leaf = await self.host.messages.latest_leaf(entry.conversation_id)
            parent = leaf.id if leaf is not None else None
        await self.host.messages.create_placeholder(
            entry.conversation_id,
            message_id=turn.assistant_message_id,
            parent_id=parent,
            model_id=turn.config.model_id,
            fence=self.host.fence_for(entry.conversation_id),
        )
        self.host.apply(entry, TurnCreated(turn, "runtime-turn"))
        await self._start(entry, turn)

    async def _start(self, entry: SessionEntry, turn: TurnInfo) -> None:
        current = entry.state.execution
        if not (isinstance(current, TurnExec) and current.turn is turn) or (
            turn.runtime and entry.state.launch != "idle"
        ):
            # Stopped while the row was being saved: nothing to start any more.
            await self.host.messages.mark_error(
                turn.assistant_message_id, fence=self.host.fence_for(entry.conversation_id)
            )
            target: LaunchTarget = (
                "runtime-turn"
                if turn.runtime
                else "steer-continuation"
                if turn.pre_admitted
                else "queued-turn"
            )
            self.host.apply(entry, LaunchAbandoned(target))
            return
        try:
            self.host.manager.start_runtime_turn(
                SendInput(
                    conversation_id=entry.conversation_id,
                    executions=[self.host.execution_spec(entry.session_id, turn)],
                    listeners=[*self.host._listeners(entry, turn), *self._waiting(entry)],
                )
            )
        except Exception:
            await self.host.messages.mark_error(
                turn.assistant_message_id, fence=self.host.fence_for(entry.conversation_id)
            )
            self.host.apply(entry, TurnTerminal(turn.turn_id, "error"))
            raise

    @staticmethod
    def _waiting(entry: SessionEntry) -> list[Listener]:
        waiting = [w for w in entry.waiting if w.is_alive()]
        entry.waiting.clear()
        return waiting

    async def terminate_held(self, entry: SessionEntry, error: dict[str, Any]) -> None:
        await self.fail_waiting(entry, error)
        stream = self.host.manager.get(entry.conversation_id)
        if stream is None or stream.is_live or not stream.chaining:
            return
        await self.host.manager.terminate_held_stream(entry.conversation_id, error)

    async def fail_waiting(self, entry: SessionEntry, error: dict[str, Any]) -> None:
        """Subscribers parked for a turn that will not come get an error terminal."""
        for listener in self._waiting(entry):
            result = TerminalResult(
                status="error",
                conversation_id=entry.conversation_id,
                turn_id="",
                execution_id="",
                model_id="",
                attempt_id=0,
                anchor_message_id=None,
                final_message=None,
                is_conversation_done=True,
                error=error,
            )
            try:
                with anyio.move_on_after(10, shield=True):
                    await listener.on_error(result)
            except Exception:  # isolation boundary: a subscriber's terminal callback
                log.exception("listener %r raised in on_error", listener.listener_id)


def _error(err: BaseException) -> dict[str, Any]:
    return dict(serialize_error(err))
