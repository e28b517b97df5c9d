"""The two timers of an agent session: the idle TTL and the compaction bound.

``SessionTimers.sync(entry, idle_ttl=..., compaction_bound=...)`` runs after every reducer step
(and when a connection is primed). An idle, connected session gets one idle timer; when it fires
(nothing cancelled it: the session stayed idle for ``idle_ttl`` seconds) the reducer gets
``IdleExpired``. A compacting session gets one compaction timer; when it fires (the compaction
ran ``compaction_bound`` seconds and nothing ended it) the reducer gets ``CompactionEnded(None)``
and the entry notes why. Leaving the state cancels the timer; a timer that is no longer the
entry's own does nothing. Timers run as tasks started with ``spawn`` and wait with ``sleep``
(the tests' clock).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from drupe.sessions.entry import SessionEntry
from drupe.sessions.session_events import CompactionEnded, Event, IdleExpired
from drupe.sessions.state import is_busy
from drupe.sessions.turn_stream import note

__all__ = ["SessionTimers"]


class SessionTimers:
    """Starts and cancels the idle and compaction timers of session entries."""

    def __init__(
        self,
        *,
        spawn: Callable[..., None],
        sleep: Callable[[float], Awaitable[None]],
        apply: Callable[[SessionEntry, Event], None],
    ) -> None:
        self._spawn = spawn
        self._sleep = sleep
        self._apply = apply

    def sync(self, entry: SessionEntry, *, idle_ttl: float, compaction_bound: float) -> None:
        """Start or cancel the entry's timers to match its state."""
        self.sync_idle(entry, idle_ttl)
        compacting = entry.state.compacting
        if compacting and entry.compaction_scope is None:
            scope = entry.compaction_scope = anyio.CancelScope()
            self._spawn(self._compaction_timer, entry, scope, compaction_bound)
        elif not compacting and entry.compaction_scope is not None:
            entry.compaction_scope.cancel()
            entry.compaction_scope = None

    def sync_idle(self, entry: SessionEntry, idle_ttl: float) -> None:
        """Start or cancel the entry's idle timer to match its state."""
        idle = not is_busy(entry.state) and entry.state.connection == "connected"
        if idle and entry.idle_scope is None:
            scope = entry.idle_scope = anyio.CancelScope()
            self._spawn(self._idle_timer, entry, scope, idle_ttl)
        elif not idle and entry.idle_scope is not None:
            entry.idle_scope.cancel()
            entry.idle_scope = None

    async def _compaction_timer(
        self, entry: SessionEntry, scope: anyio.CancelScope, bound: float
    ) -> None:
        with scope:
            await self._sleep(bound)
        if scope.cancel_called or entry.compaction_scope is not scope:
            return
        entry.compaction_scope = None
        note(entry, f"compaction did not end within {bound:.0f} s")
        self._apply(entry, CompactionEnded(None))

    async def _idle_timer(self, entry: SessionEntry, scope: anyio.CancelScope, ttl: float) -> None:
        with scope:
            await self._sleep(ttl)
        if scope.cancel_called or entry.idle_scope is not scope:
            return
        entry.idle_scope = None
        self._apply(entry, IdleExpired())
