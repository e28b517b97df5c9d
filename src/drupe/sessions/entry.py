"""``SessionEntry``: the host's record of one agent session (reducer state plus what the shell
owns: the open turn channels, the timers' scopes, approvals, the newest resume token, the
context usage and its fetch stamp, parked subscribers), and the queries over one entry.

Values and queries only; ``drupe.sessions.host`` performs every change, except the entry table's
bookkeeping: ``touch_entry`` returns a session's entry (created when new) as the most recently
used, and first forgets the least recently used forgettable entries to stay under ``limit``
(``DriverError`` when none can be forgotten).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from drupe.chunks.types import Chunk
from drupe.errors import DriverError
from drupe.ids import session_conversation_id
from drupe.sessions.drivers.base import SessionInfo
from drupe.sessions.state import SessionState, TurnExec, is_busy
from drupe.streaming.listeners.base import Listener

__all__ = ["SessionEntry", "TurnItem", "forgettable", "runtime_turn_known", "touch_entry"]

log = logging.getLogger("drupe.sessions.host")

TurnItem = tuple[Literal["chunk"], Chunk] | tuple[Literal["end"], str, Mapping[str, Any] | None]


@dataclass(eq=False, slots=True, kw_only=True)
class SessionEntry:
    """The host's record of one session: reducer state plus what the shell owns."""

    session_id: str
    conversation_id: str
    info: SessionInfo
    state: SessionState = field(default_factory=SessionState)
    channels: dict[str, MemoryObjectSendStream[TurnItem]] = field(default_factory=dict)
    overflowed: set[str] = field(default_factory=set)
    """Turns whose stream overflowed (they end ``error``)."""
    last_resume_token: str | None = None
    token_hydrated: bool = False
    idle_scope: anyio.CancelScope | None = None
    compaction_scope: anyio.CancelScope | None = None
    """The running compaction's time bound (``DEFAULT_COMPACTION_BOUND``)."""
    approvals: dict[str, tuple[str, bool]] = field(default_factory=dict)
    """approval id -> (tool call id, headless turn)."""
    context_usage: Mapping[str, Any] | None = None
    turns_ended: int = 0
    """Runtime terminals seen (the context usage is fetched at most once per value)."""
    usage_fetched_at: int = -1
    usage_lock: anyio.Lock = field(default_factory=anyio.Lock)
    commands: tuple[str, ...] = ()
    keep_queue_on_stop: bool = False
    runtime_parents: dict[str, str] = field(default_factory=dict)
    """Runtime turn id -> the assistant row its row follows (the runtime's previous answer)."""
    log: list[str] = field(default_factory=list)
    """Invalid transitions and drops, newest last (bounded; for tests and diagnostics)."""
    waiting: list[Listener] = field(default_factory=list)
    """Subscribers of a queued follow-up that had no stream to join; the next launch gets them."""
    changed: anyio.Event = field(default_factory=anyio.Event)
    """Set (and replaced) after every reducer step: ``await entry.changed.wait()``."""


def forgettable(entry: SessionEntry) -> bool:
    return (
        not is_busy(entry.state)
        and entry.state.connection == "disconnected"
        and not entry.channels
        and not entry.waiting
        and not entry.approvals
        and entry.idle_scope is None
        and entry.compaction_scope is None
    )


def runtime_turn_known(entry: SessionEntry, turn_id: str) -> bool:
    """Whether the runtime turn ``turn_id`` still runs or waits (its row is not saved yet)."""
    state = entry.state
    turns = [w.turn for w in state.waiting]
    if isinstance(state.execution, TurnExec):
        turns.append(state.execution.turn)
    return any(t.turn_id == turn_id for t in turns)


def touch_entry(entries: dict[str, SessionEntry], info: SessionInfo, *, limit: int) -> SessionEntry:
    """The entry of ``info``'s session, most recently used last (see the module docstring)."""
    entry = entries.pop(info.session_id, None)
    if entry is not None:
        entries[info.session_id] = entry  # most recently used last
    else:
        while len(entries) >= limit:
            victim = next((e for e in entries.values() if forgettable(e)), None)
            if victim is None:
                raise DriverError(f"too many active agent sessions (the limit is {limit})")
            log.info("forgetting the idle session entry %r (entry limit)", victim.session_id)
            del entries[victim.session_id]
        entry = entries[info.session_id] = SessionEntry(
            session_id=info.session_id,
            conversation_id=session_conversation_id(info.session_id),
            info=info,
        )
    entry.info = info
    return entry
