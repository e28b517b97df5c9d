"""``EventOutbox``: a connection's bounded queue of runtime events for the host's reader.

Both drivers put the events their runtime produces here (``put``, never blocking) and the
host's single reader iterates ``events()``. Bound: ``MAX_EVENTS`` unread events. Overflow
policy (the reader fell that far behind): the event that overflowed and everything after it
are dropped, the outbox closes, and ``events()`` ends with a ``DriverError`` once the reader
drained what was queued, so the host ends the running turn ``error`` with that message and
drops the connection. It never grows without bound and never fails silently.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from drupe.errors import DriverError
from drupe.sessions.drivers.base import RuntimeEvent

__all__ = ["MAX_EVENTS", "EventOutbox"]

log = logging.getLogger(__name__)

MAX_EVENTS = 10_000


class EventOutbox:
    def __init__(self, max_events: int = MAX_EVENTS) -> None:
        self.max_events = max_events
        self.overflowed = False
        self._send: MemoryObjectSendStream[RuntimeEvent]
        self._recv: MemoryObjectReceiveStream[RuntimeEvent]
        self._send, self._recv = anyio.create_memory_object_stream(max_events)

    def put(self, event: RuntimeEvent) -> bool:
        """Queue ``event``; False when the outbox is closed (or just overflowed)."""
        try:
            self._send.send_nowait(event)
        except anyio.WouldBlock:
            self.overflowed = True
            log.error("runtime events overflowed (%d unread): the connection ends", self.max_events)
            self._send.close()
            return False
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True

    def close(self) -> None:
        self._send.close()

    async def events(self) -> AsyncIterator[RuntimeEvent]:
        """The queued events; ends when the outbox closed (raises after an overflow)."""
        # The receive side is never closed here: a reader may stop early and iterate again.
        try:
            async for event in self._recv:
                yield event
        except anyio.ClosedResourceError:
            return
        if self.overflowed:
            raise DriverError(
                f"the runtime's events overflowed ({self.max_events} unread); the turn was ended"
            )
