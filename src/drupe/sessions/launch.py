"""``Launcher``: starts the host's runtime-driven turns (reference §6.4 ``startNextTurn``, §6.5).

Two targets, one launch at a time per session (the reducer's ``launch`` state), each under the
conversation's admission lock so it never interleaves with a dispatch:

* ``queued-turn``: re-read the agent (no model -> ``LaunchFailed(clear_queue)``: the held stream
  is terminated with an error, the queue cleared, no placeholder written), save a ``pending``
  row under the follow-up's user row, create the turn, ``start_runtime_turn``;
* ``steer-continuation``: save A2's ``pending`` row under the steer row U2, create A2
  pre-admitted (it never sends), ``start_runtime_turn`` (subscribers are carried);
* ``runtime-turn``: a turn the runtime started by itself: save its ``pending`` assistant row
  under the answer the runtime gave before it (else the conversation's newest message; no user
  row), confirm it, ``start_runtime_turn`` (pre-admitted: nothing is sent; its chunks were
  buffered meanwhile).

A failure reports ``LaunchFailed`` to the reducer, which decides what is dropped. A turn that
could not be started after its row was saved gets the row marked ``error``. Every row write
carries ``fence_for(conversation)`` (cluster mode; None on one node).

The launcher never holds the host: it gets the stores, the stream manager, ``turn_request``
(the turn's execution and runtime listeners) and the host's ``HostSteps``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio

from drupe.ids import new_message_id, next_turn_id
from drupe.sessions.session_events import (
    LaunchAbandoned,
    LaunchFailed,
    LaunchStarted,
    TurnCreated,
    TurnTerminal,
)
from drupe.sessions.state import LaunchTarget, Transition, TurnExec, TurnInfo, turn_config
from drupe.streaming.listeners.base import Listener, TerminalResult, serialize_error
from drupe.streaming.manager import SendInput

if TYPE_CHECKING:
    from drupe.persistence.messages import MessageStore
    from drupe.sessions.host import SessionEntry
    from drupe.sessions.lookup import SessionLookup
    from drupe.sessions.seams import HostSteps
    from drupe.streaming.manager import StreamManager

__all__ = ["Launcher"]

log = logging.getLogger(__name__)


class Launcher:
    """Launches the turns the reducer schedules (see the module docstring)."""

    def __init__(
        self,
        steps: HostSteps,
        *,
        manager: StreamManager,
        messages: MessageStore,
        lookup: SessionLookup,
        fence_for: Callable[[str], int | None],
        turn_request: Callable[[SessionEntry, TurnInfo], SendInput],
    ) -> None:
        self.steps = steps
        self.manager = manager
        self.messages = messages
        self.lookup = lookup
        self.fence_for = fence_for
        self.turn_request = turn_request
        """The turn's execution and its runtime listeners (the host's)."""

    async def launch(self, entry: SessionEntry, target: LaunchTarget) -> None:
        async with self.manager.conversation_lock(entry.conversation_id):
            state = entry.state
            if not self.steps.is_current(entry) or not (
                state.launch == "scheduled" and state.launch_target == target
            ):
                return
            self.steps.apply(entry, LaunchStarted(target))
            try:
                if target == "queued-turn":
                    await self._launch_queued(entry)
                elif target == "runtime-turn":
                    await self._launch_runtime_turn(entry)
                else:
                    await self._launch_continuation(entry)
            except Exception as err:  # isolation boundary: a launch failing (DB, driver)
                log.exception("launch %s of session %r failed", target, entry.session_id)
                self.steps.apply(entry, LaunchFailed(target, clear_queue=False, error=_error(err)))

    async def _launch_queued(self, entry: SessionEntry) -> None:
        head = entry.state.queue[0]
        info = await self.lookup.load(entry.session_id)
        if not entry.state.queue or entry.state.queue[0] is not head:
            self.steps.apply(entry, LaunchAbandoned("queued-turn"))
            return
        if info is None or not info.model_id:
            error = {"name": "AgentModelMissing", "message": "the agent has no model any more"}
            self.steps.apply(entry, LaunchFailed("queued-turn", clear_queue=True, error=error))
            return
        entry.info = info
        message_id = new_message_id()
        await self.messages.create_placeholder(
            entry.conversation_id,
            message_id=message_id,
            parent_id=head.user_message_id,
            model_id=info.model_id,
            fence=self.fence_for(entry.conversation_id),
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
        self.steps.apply(entry, TurnCreated(turn, "queued-turn"))
        await self._start(entry, turn)

    async def _launch_continuation(self, entry: SessionEntry) -> None:
        transition = entry.state.execution
        assert isinstance(transition, Transition)
        steer = transition.inputs[-1]
        source = transition.source
        message_id = new_message_id()
        await self.messages.create_placeholder(
            entry.conversation_id,
            message_id=message_id,
            parent_id=steer.user_message_id,
            model_id=source.config.model_id,
            fence=self.fence_for(entry.conversation_id),
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
        self.steps.apply(entry, TurnCreated(turn, "steer-continuation"))
        await self._start(entry, turn)

    async def _launch_runtime_turn(self, entry: SessionEntry) -> None:
        current = entry.state.execution
        assert isinstance(current, TurnExec) and current.turn.runtime
        turn = current.turn
        parent = entry.runtime_parents.pop(turn.turn_id, None)
        if parent is None:
            leaf = await self.messages.latest_leaf(entry.conversation_id)
            parent = leaf.id if leaf is not None else None
        await self.messages.create_placeholder(
            entry.conversation_id,
            message_id=turn.assistant_message_id,
            parent_id=parent,
            model_id=turn.config.model_id,
            fence=self.fence_for(entry.conversation_id),
        )
        self.steps.apply(entry, TurnCreated(turn, "runtime-turn"))
        await self._start(entry, turn)

    async def _start(self, entry: SessionEntry, turn: TurnInfo) -> None:
        current = entry.state.execution
        if not (isinstance(current, TurnExec) and current.turn is turn) or (
            turn.runtime and entry.state.launch != "idle"
        ):
            # Stopped while the row was being saved: nothing to start any more.
            await self.messages.mark_error(
                turn.assistant_message_id, fence=self.fence_for(entry.conversation_id)
            )
            target: LaunchTarget = (
                "runtime-turn"
                if turn.runtime
                else "steer-continuation"
                if turn.pre_admitted
                else "queued-turn"
            )
            self.steps.apply(entry, LaunchAbandoned(target))
            return
        try:
            request = self.turn_request(entry, turn)
            self.manager.start_runtime_turn(
                replace(request, listeners=[*request.listeners, *self._waiting(entry)])
            )
        except Exception:
            await self.messages.mark_error(
                turn.assistant_message_id, fence=self.fence_for(entry.conversation_id)
            )
            self.steps.apply(entry, TurnTerminal(turn.turn_id, "error"))
            raise

    @staticmethod
    def _waiting(entry: SessionEntry) -> list[Listener]:
        waiting = [w for w in entry.waiting if w.is_alive()]
        entry.waiting.clear()
        return waiting

    async def terminate_held(self, entry: SessionEntry, error: dict[str, Any]) -> None:
        await self.fail_waiting(entry, error)
        stream = self.manager.get(entry.conversation_id)
        if stream is None or stream.is_live or not stream.chaining:
            return
        await self.manager.terminate_held_stream(entry.conversation_id, error)

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
