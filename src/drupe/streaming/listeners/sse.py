"""SSE listeners: a stream's chunks as pre-encoded SSE frames, written in coalesced batches.

Owns ``FrameBuffer`` (the bounded per-connection queue and its pump), ``SseListener`` (the UI
message stream of ONE execution, for ``POST /api/chat`` and ``GET /api/chat/{id}/stream``) and
``MultiplexListener`` (every execution of a conversation plus status changes, for
``GET /api/conversations/{id}/events``), and the cursor format ``"<turnId>/<seq>"``.

Contract:

* ``on_chunk`` never blocks or awaits: it appends one already-encoded frame (the event's cached
  JSON behind an ``id:`` cursor line; no ``id:`` line when ``seq == 0``, the compact replay's
  uncursored events) and sets the wake-up event. The writer (``next_batch`` / ``pump``) waits
  for the wake-up, then takes EVERYTHING queued as ONE bytes write: coalescing the writes is
  what makes fan-out cheap (``deps-lab.md`` §4).
* Overflow policy: a buffer that exceeds ``max_bytes`` (a client slower than the model) drops
  the frame that overflowed and everything after it, marks the listener dead (``is_alive``
  false, the manager removes it) and ends the response WITHOUT ``data: [DONE]`` once what was
  queued is written. The frames written are contiguous, so the client resumes exactly after
  the last ``id:`` it saw (``GET .../stream`` or ``.../events`` with ``Last-Event-ID``).
* An ``SseListener`` follows one execution, chosen by a selection mode: a fixed
  ``(turn, execution)``; the first execution of the turn AFTER a given turn (a steer: the
  running turn chains a continuation that carries this listener; if the conversation ends
  without one, the steer was dropped and the response ends with an ``error`` frame); what
  arrives before the selection is made is held (``pending``). It closes at that execution's
  terminal: success adds a
  ``finish`` when none was streamed, paused adds ``{"type":"abort"}``, error adds
  ``{"type":"error","errorText":...}`` (unless one was streamed); then ``data: [DONE]``.
* Closing the HTTP connection only detaches the listener; nothing here ever aborts a stream.

Must never: import a web framework, do I/O in a listener callback, or grow without bound.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Final, Literal

import anyio
import orjson

from drupe.chunks.sse import DONE_FRAME, encode_sse
from drupe.streaming.listeners.base import BaseListener, StreamEvent, TerminalResult

__all__ = [
    "DEFAULT_MAX_BYTES",
    "PING_FRAME",
    "FrameBuffer",
    "MultiplexListener",
    "SseListener",
    "format_cursor",
    "parse_cursor",
]

DEFAULT_MAX_BYTES: Final = 1024 * 1024
"""Bytes a connection may fall behind before it is dropped (and must resume by cursor)."""
PING_FRAME: Final = b": ping\n\n"
"""An SSE comment: keeps idle connections open through proxies; every client ignores it."""

SelectMode = Literal["fixed", "next-turn", "pending"]
_WATCHED: Final = frozenset(("finish", "abort", "error"))


def format_cursor(turn_id: str, seq: int) -> str:
    """The ``id:`` of an event: ``"<turnId>/<seq>"``."""
    return f"{turn_id}/{seq}"


def parse_cursor(value: str | None) -> tuple[str, int] | None:
    """``"<turnId>/<seq>"`` -> ``(turn_id, seq)``; None for anything malformed."""
    if not value:
        return None
    turn_id, sep, seq = value.strip().rpartition("/")
    if not sep or not turn_id or not seq.isdigit() or len(seq) > 18:
        return None
    return turn_id, int(seq)


def seq_after(cursor: str | None, turn_id: str) -> int | None:
    """The seq a resume continues after: the cursor's, when it names ``turn_id``; else None
    (from the turn's start)."""
    parsed = parse_cursor(cursor)
    return parsed[1] if parsed is not None and parsed[0] == turn_id else None


class FrameBuffer:
    """A bounded queue of encoded frames drained as one coalesced write per wake-up."""

    def __init__(self, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        # A list, not a deque: an empty deque allocates a 64-slot block (~600 B) per connection.
        self._frames: list[bytes] = []
        self._bytes = 0
        self._wakeup = anyio.Event()
        self._signalled = False
        self.writes = 0
        """Batches handed to the writer so far (the ping timer reads it)."""
        self.closed = False
        """No frame is accepted any more; the writer ends once the queue is drained."""
        self.overflowed = False
        self.disconnected = False
        """The connection is gone (set by the HTTP edge); ``is_alive`` turns false."""

    def push(self, frame: bytes) -> None:
        """Queue one frame (never blocks); overflow closes the buffer (see module docstring)."""
        if self.closed:
            return
        size = self._bytes + len(frame)
        if size > self.max_bytes:
            self.overflowed = True
            self.close()
            return
        self._frames.append(frame)
        self._bytes = size
        if not self._signalled:  # wake the writer once per batch, not once per frame
            self._signalled = True
            self._wakeup.set()

    def close(self) -> None:
        """Accept nothing more; the writer finishes what is queued."""
        self.closed = True
        self._wakeup.set()

    def alive(self) -> bool:
        return not self.closed and not self.disconnected

    def disconnect(self) -> None:
        """The connection is gone: ``disconnected``, and a waiting writer returns None."""
        self.disconnected = True
        self._wakeup.set()

    def take(self) -> bytes:
        """Everything queued, as one bytes object (empty when nothing is)."""
        if not self._frames:
            return b""
        data = b"".join(self._frames) if len(self._frames) > 1 else self._frames[0]
        self._frames.clear()
        self._bytes = 0
        self.writes += 1
        return data

    async def next_batch(self, *, ping_after: float | None = None) -> bytes | None:
        """Wait for frames and return all of them as one write; None once closed and drained,
        or once disconnected (what is queued then is never written).

        With ``ping_after`` an idle wait longer than that many seconds returns ``PING_FRAME``.
        """
        while True:
            if self.disconnected:
                return None
            data = self.take()
            if data:
                return data
            if self.closed:
                return None
            wakeup = self._wakeup = anyio.Event()
            self._signalled = False
            if ping_after is None:
                await wakeup.wait()
                continue
            with anyio.move_on_after(ping_after):
                await wakeup.wait()
            if not wakeup.is_set():
                return PING_FRAME

    async def frames(self, *, ping_after: float | None = None) -> AsyncIterator[bytes]:
        """The coalesced batches as an async iterator (each item is one write)."""
        while (batch := await self.next_batch(ping_after=ping_after)) is not None:
            yield batch


def _frame(chunk: dict[str, Any]) -> bytes:
    return encode_sse(orjson.dumps(chunk))


class SseListener(BaseListener):
    """The AI SDK UI message stream of one execution, as coalesced SSE frames."""

    def __init__(
        self,
        listener_id: str,
        *,
        turn_id: str | None = None,
        execution_id: str | None = None,
        mode: SelectMode | None = None,
        after_turn_id: str | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        super().__init__(listener_id)
        self.buffer = FrameBuffer(max_bytes=max_bytes)
        self.target: tuple[str, str] | None = None
        self.mode: SelectMode = mode or ("fixed" if turn_id is not None else "pending")
        self.after_turn_id = after_turn_id
        if turn_id is not None and execution_id is not None:
            self.target = (turn_id, execution_id)
        self._early: list[StreamEvent | TerminalResult] = []
        self._saw_finish = False
        self._saw_abort = False
        self._saw_error = False
        self.terminal: TerminalResult | None = None
        self.last_seq = 0
        self._prefix: bytes | None = None
        self._prefix_turn: str | None = None

    # --- selection ------------------------------------------------------------------------

    def follow(self, turn_id: str, execution_id: str) -> None:
        """Follow ``(turn_id, execution_id)``; events held while pending are applied now."""
        self.mode = "fixed"
        self.target = (turn_id, execution_id)
        self._release()

    def follow_next_turn(self, after_turn_id: str | None) -> None:
        """Follow the first execution of the first turn that is not ``after_turn_id``."""
        self.mode = "next-turn"
        self.after_turn_id = after_turn_id
        self._release()

    def _release(self) -> None:
        held, self._early = self._early, []
        for item in held:
            if isinstance(item, StreamEvent):
                self.on_chunk(item)
            else:
                self._terminal(item)

    def _selects(self, turn_id: str, execution_id: str) -> bool:
        if self.target is None:
            if self.mode == "next-turn" and turn_id == self.after_turn_id:
                return False
            self.target = (turn_id, execution_id)
        return self.target == (turn_id, execution_id)

    # --- listener protocol ----------------------------------------------------------------

    def on_chunk(self, event: StreamEvent) -> None:
        target = self.target
        if target is None:
            if self.mode == "pending":
                self._early.append(event)
                return
            if not self._selects(event.turn_id, event.execution_id):
                return
        elif event.execution_id != target[1] or event.turn_id != target[0]:
            return
        ctype = event.chunk["type"]
        if ctype in _WATCHED:
            if ctype == "finish":
                self._saw_finish = True
            elif ctype == "abort":
                self._saw_abort = True
            else:
                self._saw_error = True
        # Hot path: the cached orjson encoding is one line, so the frame is a concatenation.
        seq = event.seq
        if seq:
            self.last_seq = seq
            prefix = self._prefix
            if prefix is None or self._prefix_turn != event.turn_id:
                self._prefix_turn = event.turn_id
                prefix = self._prefix = b"id: " + event.turn_id.encode() + b"/"
            self.buffer.push(prefix + str(seq).encode() + b"\ndata: " + event.json + b"\n\n")
        else:
            self.buffer.push(b"data: " + event.json + b"\n\n")

    async def on_done(self, result: TerminalResult) -> None:
        self._terminal(result)

    async def on_paused(self, result: TerminalResult) -> None:
        self._terminal(result)

    async def on_error(self, result: TerminalResult) -> None:
        self._terminal(result)

    def end_with(self, result: TerminalResult) -> None:
        """A terminal delivered synchronously (cluster mode's chunk-log follower)."""
        self._terminal(result)

    def is_alive(self) -> bool:
        buffer = self.buffer  # called once per chunk per listener: kept inline
        return not (buffer.closed or buffer.disconnected)

    # --- terminal -------------------------------------------------------------------------

    def _terminal(self, result: TerminalResult) -> None:
        if self.buffer.closed:
            return
        if self.mode == "pending":
            self._early.append(result)
            return
        if self.target is None and self.mode == "next-turn":
            if result.turn_id == self.after_turn_id and not result.is_conversation_done:
                return  # the running turn goes on (a sibling, or it chains our continuation)
            if result.turn_id == self.after_turn_id or not result.execution_id:
                reason = result.error["message"] if result.error else result.status
                self.close_with_error(
                    f"the message was not answered: the running turn ended ({reason})"
                )
                return
        if not self._selects(result.turn_id, result.execution_id):
            return
        self.finish(result.status, error_text=_error_text(result))

    def finish(self, status: str, *, error_text: str | None = None) -> None:
        """Write the terminal frames of ``status`` and ``[DONE]``, then close."""
        if self.buffer.closed:
            return
        if status == "success":
            if not self._saw_finish:
                self.buffer.push(_frame({"type": "finish"}))
        elif status == "paused":
            if not self._saw_abort and not self._saw_finish:
                self.buffer.push(_frame({"type": "abort"}))
        elif not self._saw_error:
            self.buffer.push(_frame({"type": "error", "errorText": error_text or status}))
        self.buffer.push(DONE_FRAME)
        self.buffer.close()

    def close_with_error(self, text: str) -> None:
        """End the response with an ``error`` frame and ``[DONE]``."""
        if self.buffer.closed:
            return
        self.buffer.push(_frame({"type": "error", "errorText": text}))
        self.buffer.push(DONE_FRAME)
        self.buffer.close()


def _error_text(result: TerminalResult) -> str | None:
    if result.error is None:
        return None
    return str(result.error.get("message") or result.error.get("name") or "error")


class MultiplexListener(BaseListener):
    """Every execution of one conversation, each chunk wrapped with its identities.

    Frames: ``{"kind":"chunk","executionId","attemptId","seq","modelId","turnId","chunk"}``
    with ``id: <turnId>/<seq>`` (none for uncursored replay events), and
    ``{"kind":"status","status","turnId"}`` (no ``id:``, so a client's cursor never moves on
    a status frame). A chunk whose cursor is not after the last one sent for its turn is
    dropped, so attaching to a stream this listener was carried into never doubles an event.
    The HTTP edge re-attaches it to every new stream of the conversation (status observer).
    """

    def __init__(self, listener_id: str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        super().__init__(listener_id)
        self.buffer = FrameBuffer(max_bytes=max_bytes)
        self._last: dict[str, int] = {}

    def on_chunk(self, event: StreamEvent) -> None:
        seq = event.seq
        if seq:
            last = self._last.get(event.turn_id, 0)
            if seq <= last:
                return
            self._last[event.turn_id] = seq
        payload = (
            b'{"kind":"chunk","executionId":'
            + orjson.dumps(event.execution_id)
            + b',"attemptId":'
            + str(event.attempt_id).encode()
            + b',"seq":'
            + str(seq).encode()
            + b',"modelId":'
            + orjson.dumps(event.execution_id)
            + b',"turnId":'
            + orjson.dumps(event.turn_id)
            + b',"chunk":'
            + event.json
            + b"}"
        )
        cursor = f"{event.turn_id}/{seq}" if seq else None
        self.buffer.push(encode_sse(payload, event_id=cursor))

    def on_status(self, status: str, turn_id: str | None) -> None:
        """Queue a status frame (called from the manager's status observer)."""
        self.buffer.push(
            encode_sse(orjson.dumps({"kind": "status", "status": status, "turnId": turn_id}))
        )

    def seen(self, turn_id: str) -> int:
        """The last cursor sent for ``turn_id`` (0 when none)."""
        return self._last.get(turn_id, 0)

    def is_alive(self) -> bool:
        return self.buffer.alive()
