"""The chunk source of one agent-session turn, and the channel the host routes chunks into.

``turn_stream`` is what the stream manager iterates for a session turn (the host's
``open_turn_stream``): it opens the turn's bounded channel (``channel_limit`` items), emits the
``start`` chunk, connects the runtime (single-flight, through ``ConnectionKeeper``) and sends the
user input exactly once (never for a pre-admitted continuation, and only while the turn is still
the admittable current turn), then yields the chunks the host routes into the channel and ends
on the runtime's terminal: ``success`` returns, ``error`` raises ``DriverError``, ``paused`` (a
stop during a roll) aborts the stream as a user stop. A turn whose channel overflowed ends with
``DriverError`` and closes the connection. Ending any other way (cancelled: a Stop) feeds the
reducer ``Stopped`` (synchronously, so a cancellation cannot skip it).

``push`` routes one item into a turn's channel; a turn with no open channel drops it (noted),
and a full channel marks the turn overflowed and closes the channel. ``note`` logs and keeps a
line on the entry (the last 100); ``drop_level`` is INFO for a drop the user asked for, WARNING
otherwise. None of these decides anything: the reducer does.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable

import anyio

from drupe.chunks.types import Chunk
from drupe.errors import DriverError
from drupe.sessions.connections import ConnectionKeeper
from drupe.sessions.drivers.base import UserInput
from drupe.sessions.entry import SessionEntry, TurnItem
from drupe.sessions.session_events import Event, Stopped, TurnAdmitted, TurnStreamOpened
from drupe.sessions.state import TurnExec
from drupe.streaming.manager import StreamManager

__all__ = ["drop_level", "note", "push", "turn_stream"]

log = logging.getLogger("drupe.sessions.host")


async def turn_stream(
    lookup: Callable[[str], SessionEntry | None],
    session_id: str,
    turn_id: str,
    *,
    apply: Callable[[SessionEntry, Event], None],
    connections: ConnectionKeeper,
    manager: StreamManager,
    channel_limit: int,
) -> AsyncIterator[Chunk]:
    """The chunk source of one session turn (see the module docstring)."""
    entry = lookup(session_id)
    current = entry.state.execution if entry is not None else None
    if entry is None or not (isinstance(current, TurnExec) and current.turn.turn_id == turn_id):
        raise DriverError(f"turn {turn_id!r} is not the current turn of {session_id!r}")
    turn = current.turn
    send, receive = anyio.create_memory_object_stream[TurnItem](channel_limit)
    entry.channels[turn_id] = send
    send.send_nowait(("chunk", {"type": "start", "messageId": turn.assistant_message_id}))
    finished = False
    try:
        apply(entry, TurnStreamOpened(turn_id))
        if not turn.pre_admitted:
            connection = await connections.ensure(entry, turn.config.model_id)
            if _admittable(entry, turn_id):
                await connection.send(
                    UserInput(
                        message=turn.message,
                        system_reminder=turn.steer,
                        headless=turn.headless,
                    )
                )
                apply(entry, TurnAdmitted(turn_id))
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
                    manager.abort(entry.conversation_id, "user-stop")
                    raise DriverError("the session was stopped")
                return
        if turn_id in entry.overflowed:
            # The turn's stream fell MAX_TURN_CHANNEL chunks behind: end it visibly.
            finished = True
            entry.overflowed.discard(turn_id)
            await connections.close_now(entry, "turn stream overflow")
            raise DriverError(
                f"the answer fell more than {channel_limit} chunks behind; it was ended"
            )
    except DriverError:
        finished = True
        raise
    finally:
        entry.channels.pop(turn_id, None)
        if not finished:
            keep = entry.keep_queue_on_stop  # synchronous: nothing here can be cancelled
            entry.keep_queue_on_stop = False
            apply(entry, Stopped(keep_queue=keep))


def _admittable(entry: SessionEntry, turn_id: str) -> bool:
    current = entry.state.execution
    return (
        isinstance(current, TurnExec)
        and current.turn.turn_id == turn_id
        and current.admission == "pending"
        and current.terminal is None
    )


def push(entry: SessionEntry, turn_id: str, item: TurnItem) -> None:
    """Route ``item`` into the turn's channel (see the module docstring)."""
    channel = entry.channels.get(turn_id)
    if channel is None:
        note(entry, f"turn {turn_id!r} has no open stream; {item[0]} dropped", logging.WARNING)
        return
    try:
        channel.send_nowait(item)
    except anyio.WouldBlock:
        note(entry, f"turn {turn_id!r} overflowed its stream; it ends in error", logging.WARNING)
        entry.overflowed.add(turn_id)
        entry.channels.pop(turn_id, None)
        channel.close()


def note(entry: SessionEntry, text: str, level: int = logging.INFO) -> None:
    """Log ``text`` (anomalies at WARNING: they lose something) and keep it on the entry."""
    log.log(level, "session %r: %s", entry.session_id, text)
    entry.log.append(text)
    del entry.log[:-100]


def drop_level(reason: str) -> int:
    """A drop the user asked for (a stop) is routine; any other drop loses something."""
    return logging.INFO if reason == "stopped" else logging.WARNING
