"""``ChatOutbox``: the per-chat delivery queue behind a channel listener (one pump task).

Contract:

* FIFO per chat: live updates, terminal texts and notices leave in the order they were queued.
  Live updates coalesce: a queued update of an answer is replaced by the newer text, and one
  whose answer already has its terminal text queued is dropped.
* One live answer = one platform message: the first update sends it, later ones edit it
  (``preview`` of the text, at most ``limit`` characters). The terminal text edits that message
  with its first ``split_message`` piece and sends the other pieces after it.
* Throttle: at most one platform call per ``edit_interval`` seconds per chat (default 1 s), on an
  injected ``Clock``. A ``RateLimited`` answer (HTTP 429) waits its ``retry_after`` on the same
  clock and retries the same call (at most ``max_rate_limit_retries`` times).
* Approvals: a notice queued with an ``approval_id`` carries the buttons on its last piece,
  and the outbox keeps that message's id; ``settle(approval_id, line)`` later edits it to its
  text followed by ``line`` (the decision), its buttons removed (the last ``max_offers``
  approvals are kept).
* Every call is bounded by ``send_timeout`` (15 s). A timed-out or failed TERMINAL send is never
  retried (it may have arrived: at-most-once); the failure is reported through ``on_error``.
* At-most-once terminal delivery, across restarts: the ``DeliveryLedger`` must grant
  ``claim_terminal`` before a terminal text is sent; the platform message id is recorded with
  ``opened`` so a later process can finish an answer a restart interrupted.
* Queue calls (``live``, ``terminal``, ``notice``) never block and never raise: a slow or dead
  platform holds up only this chat's pump, never the stream, persistence or another chat. The
  queue is bounded (``max_queued``): past it, the oldest live update is dropped first; terminal
  texts and notices are kept.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import anyio

from drupe.channels.ledger import DeliveryLedger, MemoryLedger
from drupe.channels.text_shaping import preview, split_message

__all__ = [
    "Button",
    "ChannelSink",
    "ChatOutbox",
    "Clock",
    "DeliveryLedger",
    "MemoryLedger",
    "MonotonicClock",
    "RateLimited",
]

log = logging.getLogger(__name__)

DEFAULT_EDIT_INTERVAL: Final = 1.0
DEFAULT_SEND_TIMEOUT: Final = 15.0


class RateLimited(Exception):
    """The platform answered 429; retry after ``retry_after`` seconds."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"rate limited; retry after {retry_after} s")
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class Button:
    """An inline button; ``data`` comes back to the adapter when it is pressed."""

    label: str
    data: str


class ChannelSink(Protocol):
    """The outbound port a platform adapter implements (the core never imports a SDK)."""

    limit: int
    """The platform's message length limit, in characters."""

    async def send(self, chat_id: str, text: str, *, buttons: Sequence[Button] = ()) -> str:
        """Send a message; return its platform id. Raise ``RateLimited`` on a 429."""
        ...

    async def edit(
        self, chat_id: str, message_id: str, text: str, *, drop_buttons: bool = False
    ) -> None:
        """Replace a sent message's text; ``drop_buttons``: remove its buttons too. Raise
        ``RateLimited`` on a 429."""
        ...

    async def typing(self, chat_id: str) -> None:
        """Show a typing indicator (best effort)."""
        ...


class Clock(Protocol):
    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


@dataclass(slots=True)
class _Answer:
    delivery_id: str
    anchor_message_id: str | None
    platform_message_id: str | None = None
    shown: str = ""
    latest: str = ""
    terminal_queued: bool = False


@dataclass(frozen=True, slots=True)
class _Live:
    delivery_id: str


@dataclass(frozen=True, slots=True)
class _Terminal:
    delivery_id: str
    text: str


@dataclass(frozen=True, slots=True)
class _Notice:
    text: str
    buttons: tuple[Button, ...] = ()
    approval_id: str | None = None


@dataclass(frozen=True, slots=True)
class _Settle:
    approval_id: str
    line: str


_Op = _Live | _Terminal | _Notice | _Settle


@dataclass(slots=True)
class OutboxStats:
    sends: int = 0
    edits: int = 0
    failures: int = 0
    dropped_live: int = 0
    last_error: str | None = None


class ChatOutbox:
    """One chat's delivery queue; ``run`` is its pump (started by the channel's task group)."""

    def __init__(
        self,
        sink: ChannelSink,
        *,
        channel_id: str,
        chat_id: str,
        clock: Clock | None = None,
        ledger: DeliveryLedger | None = None,
        edit_interval: float = DEFAULT_EDIT_INTERVAL,
        send_timeout: float = DEFAULT_SEND_TIMEOUT,
        max_queued: int = 256,
        max_rate_limit_retries: int = 5,
        max_offers: int = 256,
        on_error: Callable[[str], None] = lambda message: None,
    ) -> None:
        self.sink = sink
        self.channel_id = channel_id
        self.chat_id = chat_id
        self.clock = clock or MonotonicClock()
        self.ledger = ledger or MemoryLedger()
        self.edit_interval = edit_interval
        self.send_timeout = send_timeout
        self.max_queued = max_queued
        self.max_rate_limit_retries = max_rate_limit_retries
        self.on_error = on_error
        self.max_offers = max_offers
        self._offers: dict[str, tuple[str, str]] = {}
        """approval id -> (platform message id, text) of the message that offers it."""
        self.stats = OutboxStats()
        self._answers: dict[str, _Answer] = {}
        self._queue: deque[_Op] = deque()
        self._wake = anyio.Event()
        self._next_call_at = -math.inf
        self._idle = anyio.Event()
        self._idle.set()
        self.throttled = False
        """True while the pump waits for the throttle (or a 429's ``retry_after``)."""

    # --- queueing (never blocks, never raises) ------------------------------------------------

    def begin(self, delivery_id: str, anchor_message_id: str | None) -> None:
        self._answers.setdefault(delivery_id, _Answer(delivery_id, anchor_message_id))

    def resume(
        self, delivery_id: str, anchor_message_id: str | None, platform_id: str | None
    ) -> None:
        """Adopt an answer a previous process started (recovery at start)."""
        answer = self._answers.setdefault(delivery_id, _Answer(delivery_id, anchor_message_id))
        answer.platform_message_id = platform_id

    def live(self, delivery_id: str, text: str) -> None:
        answer = self._answers.get(delivery_id)
        if answer is None or answer.terminal_queued:
            return
        answer.latest = text
        if not any(isinstance(op, _Live) and op.delivery_id == delivery_id for op in self._queue):
            self._push(_Live(delivery_id))

    def terminal(self, delivery_id: str, text: str) -> None:
        answer = self._answers.get(delivery_id)
        if answer is None or answer.terminal_queued:
            return
        answer.terminal_queued = True
        self._push(_Terminal(delivery_id, text))

    def notice(
        self, text: str, buttons: Sequence[Button] = (), *, approval_id: str | None = None
    ) -> None:
        self._push(_Notice(text, tuple(buttons), approval_id))

    def settle(self, approval_id: str, line: str) -> None:
        """Edit the message that offered ``approval_id`` (if this chat has one): its text and
        ``line``, no buttons. Queued after the offer itself (FIFO)."""
        self._push(_Settle(approval_id, line))

    def _push(self, op: _Op) -> None:
        if len(self._queue) >= self.max_queued:
            stale = next((o for o in self._queue if isinstance(o, _Live)), None)
            if stale is not None:
                self._queue.remove(stale)
                self.stats.dropped_live += 1
        self._queue.append(op)
        self._idle = anyio.Event() if self._idle.is_set() else self._idle
        self._wake.set()

    async def wait_idle(self) -> None:
        """Return once every queued operation was attempted (tests, shutdown drain)."""
        await self._idle.wait()

    # --- the pump -----------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            if not self._queue:
                self._idle.set()
                await self._wake.wait()
                self._wake = anyio.Event()
                continue
            op = self._queue.popleft()
            try:
                await self._perform(op)
            except anyio.get_cancelled_exc_class():
                raise
            except Exception as err:  # a platform failure never stops the pump
                self._failed(err)

    async def _perform(self, op: _Op) -> None:
        match op:
            case _Live(delivery_id=delivery_id):
                if (answer := self._answers.get(delivery_id)) is not None:
                    await self._live(answer)
            case _Terminal(delivery_id=delivery_id, text=text):
                if (answer := self._answers.get(delivery_id)) is not None:
                    await self._terminal(answer, text)
            case _Notice(text=text, buttons=buttons, approval_id=approval_id):
                pieces = split_message(text, self.sink.limit)
                for piece in pieces[:-1]:
                    await self._send(piece)
                message_id = await self._send(pieces[-1], buttons)
                if approval_id is not None:
                    self._offers[approval_id] = (message_id, pieces[-1])
                    while len(self._offers) > self.max_offers:
                        del self._offers[next(iter(self._offers))]
            case _Settle(approval_id=approval_id, line=line):
                if (offer := self._offers.pop(approval_id, None)) is not None:
                    message_id, shown = offer
                    await self._call(
                        lambda: self.sink.edit(
                            self.chat_id, message_id, f"{shown}\n\n{line}", drop_buttons=True
                        )
                    )
                    self.stats.edits += 1

    async def _live(self, answer: _Answer) -> None:
        await self._wait_turn()  # the text is read AFTER the throttle: the newest one is shown
        if answer.terminal_queued:
            return
        text = preview(answer.latest, self.sink.limit)
        if not text.strip() or text == answer.shown:
            return
        if answer.platform_message_id is None:
            with anyio.CancelScope(shield=True):  # on record BEFORE the platform may have it
                await self._record(answer, None)
            message_id = await self._call(lambda: self.sink.send(self.chat_id, text))
            self.stats.sends += 1
            answer.platform_message_id = message_id
            answer.shown = text
            with anyio.CancelScope(shield=True):
                await self._record(answer, message_id)
        else:
            message_id = answer.platform_message_id
            await self._call(lambda: self.sink.edit(self.chat_id, message_id, text))
            self.stats.edits += 1
            answer.shown = text

    async def _record(self, answer: _Answer, platform_message_id: str | None) -> None:
        await self.ledger.opened(
            answer.delivery_id,
            channel_id=self.channel_id,
            chat_id=self.chat_id,
            anchor_message_id=answer.anchor_message_id,
            platform_message_id=platform_message_id,
        )

    async def _terminal(self, answer: _Answer, text: str) -> None:
        self._answers.pop(answer.delivery_id, None)
        if not text.strip():
            return
        claimed = await self.ledger.claim_terminal(
            answer.delivery_id,
            channel_id=self.channel_id,
            chat_id=self.chat_id,
            anchor_message_id=answer.anchor_message_id,
        )
        if not claimed:
            log.info(
                "terminal text of %s was already delivered; not sent again", answer.delivery_id
            )
            return
        pieces = split_message(text, self.sink.limit)
        first, rest = pieces[0], pieces[1:]
        message_id = answer.platform_message_id
        # A failure below leaves the delivery ``terminal`` (claimed, maybe sent): never resent.
        if message_id is None:
            await self._call(lambda: self.sink.send(self.chat_id, first))
            self.stats.sends += 1
        elif first != answer.shown:
            await self._call(lambda: self.sink.edit(self.chat_id, message_id, first))
            self.stats.edits += 1
        for piece in rest:
            await self._send(piece)
        await self.ledger.delivered(answer.delivery_id)

    async def _send(self, text: str, buttons: Sequence[Button] = ()) -> str:
        message_id = await self._call(lambda: self.sink.send(self.chat_id, text, buttons=buttons))
        self.stats.sends += 1
        return message_id

    async def _wait_turn(self) -> None:
        wait = self._next_call_at - self.clock.now()
        if wait > 0:
            self.throttled = True
            try:
                await self.clock.sleep(wait)
            finally:
                self.throttled = False

    async def _call(self, make: Callable[[], Awaitable[str | None]]) -> str:
        attempts = 0
        while True:
            await self._wait_turn()
            self._next_call_at = self.clock.now() + self.edit_interval
            try:
                with anyio.fail_after(self.send_timeout):
                    result = await make()
                return str(result) if result is not None else ""
            except RateLimited as limited:
                attempts += 1
                if attempts > self.max_rate_limit_retries:
                    raise
                log.info("chat %s rate limited; waiting %.1f s", self.chat_id, limited.retry_after)
                self._next_call_at = self.clock.now() + limited.retry_after
            except TimeoutError as err:
                raise TimeoutError(
                    f"the platform did not answer within {self.send_timeout:g} s"
                ) from err

    def _failed(self, err: Exception) -> None:
        message = str(err) or type(err).__name__
        self.stats.failures += 1
        self.stats.last_error = message
        log.warning(
            "channel %s chat %s: delivery failed: %s", self.channel_id, self.chat_id, message
        )
        self.on_error(message)
