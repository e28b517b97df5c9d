"""Terminal dispatch: tell a stream's listeners how one execution ended (reference §2.4.5).

Order: persistence-phase listeners, then unphased ones, then cleanup-phase ones, each awaited.
Dead listeners are removed, throws are isolated and logged with the listener id, and a
``TerminalPersistenceError`` from a persistence-phase listener suppresses the unphased
(notification) listeners for that terminal. The caller shields and bounds the whole dispatch.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import anyio

from drupe.errors import TerminalPersistenceError
from drupe.streaming.listeners.base import Listener, TerminalResult
from drupe.streaming.live import LiveStream

__all__ = ["dispatch_terminal", "notify_listeners"]

log = logging.getLogger(__name__)


def _handler(listener: Listener, result: TerminalResult):  # type: ignore[no-untyped-def]
    if result.status == "success":
        return listener.on_done
    if result.status == "paused":
        return listener.on_paused
    return listener.on_error


async def dispatch_terminal(stream: LiveStream, result: TerminalResult) -> None:
    """Run every listener's terminal callback for ``result``, in phase order."""
    suppressed = False
    for listener in stream.ordered_listeners():
        if suppressed and listener.terminal_phase is None:
            continue
        if not listener.is_alive():
            stream.remove_listener(listener.listener_id)
            continue
        try:
            await _handler(listener, result)(result)
        except TerminalPersistenceError:
            log.exception("terminal persistence failed for %r", listener.listener_id)
            if listener.terminal_phase == "persistence":
                suppressed = True
        except Exception:  # isolation boundary: terminal listener dispatch
            log.exception("listener %r raised in its terminal callback", listener.listener_id)


async def notify_listeners(
    listeners: Sequence[Listener], result: TerminalResult, *, limit: float
) -> None:
    """Deliver ``result`` to listeners that have no stream any more (a failed launch)."""
    for listener in listeners:
        try:
            with anyio.move_on_after(limit, shield=True):
                await _handler(listener, result)(result)
        except Exception:  # isolation boundary: terminal listener dispatch
            log.exception("listener %r raised in its terminal callback", listener.listener_id)
