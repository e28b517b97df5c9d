"""Stopping one agent session: ``stop_session`` aborts its live turn (persisted ``paused``),
drops its queue, and returns once its runtime connection closed.

During a roll (one answer ended, its continuation not started) nothing is live: the reducer
latches the continuation ``paused`` and it still delivers what was buffered, so the stop waits
for the session to go idle (at most ``STOP_ROLL_BOUND_S``, then it aborts) instead of aborting
it. Otherwise the live stream is aborted and drained, and the reducer gets ``Stopped`` when
nothing was aborted. The stop then waits for the connection to close (at most
``STOP_CLOSE_BOUND_S``): a stopped CLI calls the model no more. Returns whether something was
stopped. Receives what it uses, never the host.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import anyio

from drupe.sessions.connections import ConnectionKeeper
from drupe.sessions.entry import SessionEntry
from drupe.sessions.session_events import Event, Stopped
from drupe.sessions.state import Idle, Transition
from drupe.streaming.manager import StreamManager

__all__ = ["STOP_CLOSE_BOUND_S", "STOP_ROLL_BOUND_S", "stop_session"]

STOP_ROLL_BOUND_S: Final = 10.0
"""How long a stop waits for a stopped roll's continuation to settle (then it aborts it)."""
STOP_CLOSE_BOUND_S: Final = 20.0
"""How long a stop waits for the stopped runtime's connection to close."""


async def stop_session(
    entry: SessionEntry,
    *,
    apply: Callable[[SessionEntry, Event], None],
    manager: StreamManager,
    connections: ConnectionKeeper,
) -> bool:
    """Stop the session of ``entry`` (see the module docstring)."""
    rolling = isinstance(entry.state.execution, Transition)
    if rolling:
        # Nothing is live during a roll (A1a ended, A2 not started): A2 is latched
        # ``paused``; it still gets its row with what was buffered (see the reducer).
        apply(entry, Stopped())
        # A2 ends by itself once it delivered the buffer; aborting it would lose that.
        with anyio.move_on_after(STOP_ROLL_BOUND_S):
            while not isinstance(entry.state.execution, Idle):
                await entry.changed.wait()
    aborted = False
    if not isinstance(entry.state.execution, Idle) or not rolling:
        aborted = await manager.abort_and_drain(entry.conversation_id)
    if not aborted and not rolling:
        apply(entry, Stopped())
    # Return only once the runtime is gone: a stopped CLI calls the model no more.
    with anyio.move_on_after(STOP_CLOSE_BOUND_S):
        await connections.wait_closed(entry.session_id)
    return aborted or rolling
