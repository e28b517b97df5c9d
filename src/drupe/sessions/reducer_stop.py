"""The session reducer's answer to a user stop: ``stop(state, Stopped(keep_queue))``.

Pure and synchronous, like ``reduce``. The connection closes (``CloseConnection("stop")``) and
waiting runtime turns end with it (their buffers dropped). The live turn ends ``paused`` and
nothing more reaches its stream; a runtime turn whose row is not saved yet ends at once. During
a roll the continuation is latched ``paused`` and still gets its row with what was buffered.
The queue, and the steers folded into the stopped turn, are dropped, or (``keep_queue``, when
the stop only tears the runtime down) go back first in line in submission order. Then the next
turn may launch.
"""

from __future__ import annotations

from dataclasses import replace

from drupe.sessions.reducer_steps import maybe_launch, ordered
from drupe.sessions.session_events import Stopped
from drupe.sessions.state import (
    CloseConnection,
    DropBuffer,
    DropQueued,
    Effect,
    Idle,
    Result,
    SessionState,
    Transition,
    TurnExec,
)

__all__ = ["stop"]


def stop(state: SessionState, event: Stopped) -> Result:
    """The user stopped the session: the connection closes, the live turn ends ``paused``."""
    keep_queue = event.keep_queue
    execution = state.execution
    effects: list[Effect] = [CloseConnection("stop")]
    stopped = replace(state, connection="disconnected", waiting=())
    for waiting in state.waiting:
        # Runtime turns not begun yet: nothing of them was streamed; they end with the runtime.
        if waiting.buffer:
            effects.append(DropBuffer(waiting.buffer, "stopped"))
    if state.queue and not keep_queue:
        effects.append(DropQueued(state.queue, "stopped"))
        stopped = replace(stopped, queue=())
    if not keep_queue and stopped.launch == "scheduled" and stopped.launch_target == "queued-turn":
        stopped = replace(stopped, launch="idle", launch_target=None)
    if stopped.launch_target == "runtime-turn" and isinstance(execution, TurnExec):
        return _stop_unsaved_runtime_turn(stopped, execution, effects)
    if isinstance(execution, TurnExec):
        stopped = replace(stopped, execution=_stop_turn(execution, keep_queue, effects))
        if keep_queue and execution.folded:
            # The runtime was torn down under them: they go back, first in line.
            stopped = replace(stopped, queue=ordered(execution.folded, stopped.queue))
    if isinstance(execution, Transition) and execution.terminal is None:
        # A user stop during the roll: A2 still gets its row, with what was buffered, and ends
        # ``paused`` (the continuation opens, delivers the buffer, closes).
        if execution.folded and keep_queue:
            stopped = replace(stopped, queue=ordered(execution.folded, stopped.queue))
        elif execution.folded:
            effects.append(DropQueued(execution.folded, "stopped"))
        ended_roll = replace(execution, folded=(), terminal=("paused", None))
        return replace(stopped, execution=ended_roll), effects
    stopped, launched = maybe_launch(stopped)
    return stopped, [*effects, *launched]


def _stop_unsaved_runtime_turn(
    stopped: SessionState, execution: TurnExec, effects: list[Effect]
) -> Result:
    """A runtime turn whose row is not saved yet: nothing was streamed; it ends here (a
    running launch finds it gone and abandons)."""
    if execution.buffer:
        effects.append(DropBuffer(execution.buffer, "stopped"))
    stopped = replace(stopped, execution=Idle())
    if stopped.launch == "scheduled":
        stopped = replace(stopped, launch="idle", launch_target=None)
    stopped, launched = maybe_launch(stopped)
    return stopped, [*effects, *launched]


def _stop_turn(execution: TurnExec, keep_queue: bool, effects: list[Effect]) -> TurnExec:
    """The stopped turn: the manager is ending its stream (paused); nothing more reaches it."""
    if execution.folded and not keep_queue:
        effects.append(DropQueued(execution.folded, "stopped"))
    ended = replace(execution, folded=(), phase="awaiting-persistence")
    if execution.terminal is None:
        ended = replace(ended, terminal=("paused", None))
    return ended
