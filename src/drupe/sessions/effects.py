"""The effects of one reducer step, performed: ``perform(entry, effects, ...)``.

Chunk effects (``Forward``, ``DeliverBuffer``, ``CloseStream``) go into the turn's channel
(``turn_stream.push``); launches and held-stream terminations become tasks of the ``Launcher``;
``CloseConnection`` closes the current connection; ``SessionOnIdle`` starts the driver's idle
hook as a task; drops and invalid events are noted on the entry (a drop the user asked for at
INFO, any other at WARNING). Every task is started with ``spawn`` (the host's task group). The
effects are performed in the order the reducer gave them; nothing here decides anything.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from drupe.sessions.connections import ConnectionKeeper
from drupe.sessions.entry import SessionEntry
from drupe.sessions.launch import Launcher
from drupe.sessions.state import (
    CloseConnection,
    CloseStream,
    DeliverBuffer,
    DropBuffer,
    DropQueued,
    Effect,
    Forward,
    LogInvalid,
    ScheduleLaunch,
    SessionOnIdle,
    TerminateHeld,
)
from drupe.sessions.turn_stream import drop_level, note, push

__all__ = ["perform"]


def perform(
    entry: SessionEntry,
    effects: Sequence[Effect],
    *,
    spawn: Callable[..., None],
    launcher: Launcher,
    connections: ConnectionKeeper,
    on_idle: Callable[[SessionEntry], Coroutine[Any, Any, None]],
) -> None:
    """Perform ``effects`` for ``entry``, in order (see the module docstring)."""
    for effect in effects:
        match effect:
            case Forward(turn_id=turn_id, chunk=chunk):
                push(entry, turn_id, ("chunk", chunk))
            case DeliverBuffer(turn_id=turn_id, chunks=chunks):
                for chunk in chunks:
                    push(entry, turn_id, ("chunk", chunk))
            case CloseStream(turn_id=turn_id, status=status, error=error):
                push(entry, turn_id, ("end", status, error))
            case ScheduleLaunch(target=target):
                spawn(launcher.launch, entry, target)
            case TerminateHeld(error=error):
                spawn(launcher.terminate_held, entry, dict(error))
            case DropQueued(items=items, reason=reason):
                ids = [i.user_message_id for i in items]
                note(entry, f"dropped follow-ups {ids} ({reason})", drop_level(reason))
            case DropBuffer(chunks=chunks, reason=reason):
                note(entry, f"dropped {len(chunks)} chunk(s) ({reason})", drop_level(reason))
            case CloseConnection(reason=reason):
                connections.close_current(entry, reason)
            case SessionOnIdle():
                spawn(on_idle, entry)
            case LogInvalid(event=name, reason=reason):
                note(entry, f"invalid {name}: {reason}", logging.WARNING)
