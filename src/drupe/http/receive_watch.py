"""``ReceiveWatch``: keep one ASGI ``receive()`` pending without a task of its own.

An SSE response must notice ``http.disconnect`` while it waits for frames, so a ``receive()``
has to be in flight beside the writer. A task (and the task group that owns it) per connection
costs ~3-6 KiB at thousands of connections (issue 24 §2). Instead the watch steps the
``receive()`` coroutine itself, as an asyncio task would: each step runs the coroutine to its
next suspension, and the asyncio future it suspends on gets a done callback that takes the
next step. Each message ``receive()`` returns is handed to ``on_message``; a true result asks
for the next ``receive()``, a false one ends the watch.

Contract:

* ``start()`` takes the first step synchronously; ``close()`` (idempotent) stops: it removes
  the pending callback and closes the coroutine, so its ``finally`` blocks run (asyncio's
  ``Event.wait`` drops its waiter);
* a ``receive()`` that raises, or that suspends on something this watch cannot wait for (not
  an asyncio future; e.g. another event loop library's trap), ends the watch as
  ``on_message(None)``: the caller treats it as a lost connection;
* every step runs in the context copied at ``start``, as a task's would;
* a ``receive()`` that returns an awaitable which is not a coroutine (granian returns its own
  future-like ``PyFutureAwaitable``) is stepped through a one-line coroutine that awaits it.

Must never: run a step re-entrantly (a message returned at once is handled in a loop), or
raise out of a done callback.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from starlette.types import Message, Receive

__all__ = ["ReceiveWatch"]

log = logging.getLogger(__name__)


async def _awaiting(awaitable: Any) -> Message:
    """A coroutine around an awaitable that has no ``send`` (granian's receive future)."""
    message: Message = await awaitable
    return message


class ReceiveWatch:
    """Drives ``receive()`` from future callbacks, handing each message to ``on_message``."""

    __slots__ = ("_closed", "_context", "_coro", "_on_message", "_receive", "_waiting")

    def __init__(self, receive: Receive, on_message: Callable[[Message | None], bool]) -> None:
        self._receive = receive
        self._on_message = on_message
        self._coro: Coroutine[Any, Any, Message] | None = None
        self._waiting: asyncio.Future[Any] | None = None
        self._context: contextvars.Context | None = None
        self._closed = False

    def start(self) -> None:
        self._context = contextvars.copy_context()
        self._context.run(self._step, None)

    def _step(self, _done: object) -> None:
        self._waiting = None
        while not self._closed:
            coro = self._coro
            if coro is None:
                awaitable: Any = self._receive()
                if not hasattr(awaitable, "send"):  # e.g. granian's PyFutureAwaitable
                    awaitable = _awaiting(awaitable)
                coro = self._coro = awaitable
            try:
                yielded = coro.send(None)
            except StopIteration as stop:
                self._coro = None
                if self._on_message(stop.value):
                    continue
                return
            except BaseException:  # isolation boundary: a failed receive ends the watch
                log.debug("receive() raised; treated as a lost connection", exc_info=True)
                self._coro = None
                self._on_message(None)
                return
            if yielded is None:  # a bare yield (asyncio.sleep(0)): step again soon
                asyncio.get_running_loop().call_soon(self._step, None, context=self._context)
                return
            if asyncio.isfuture(yielded) and getattr(yielded, "_asyncio_future_blocking", False):
                yielded._asyncio_future_blocking = False
                self._waiting = yielded
                yielded.add_done_callback(self._step, context=self._context)
                return
            log.warning("receive() awaited %r, which only a task can wait for", yielded)
            self.close()
            self._on_message(None)

    def close(self) -> None:
        self._closed = True
        waiting, self._waiting = self._waiting, None
        if waiting is not None:
            waiting.remove_done_callback(self._step)
        coro, self._coro = self._coro, None
        if coro is not None:
            try:
                coro.close()
            except BaseException:  # isolation boundary: closing an abandoned receive()
                log.debug("closing receive() raised", exc_info=True)
