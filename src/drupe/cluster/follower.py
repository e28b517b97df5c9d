"""``LogFollower``: an SSE subscriber on any node, fed from the chunk log (cluster mode).

Contract (``docs/lifecycles/cluster.md``, "Subscribers"):

* In cluster mode every HTTP subscriber of a chat stream, on the owner or on any other node,
  is an ``SseListener`` fed by a follower: the node's ONE ``NodeReader`` reads the log and the
  follower turns each entry back into the events and terminal the listener would have got in
  process (same chunks, the owner's seqs as cursors, the same terminal rules). So a client
  sees the same ids whichever node it reaches, and resumes on any node exactly.
* ``follow_turn(turn, after=seq)``: the turn's log from its start, skipping what the client has
  (``seq <= after``), then live, to the end.
* ``follow_next(after_turn)``: a steer's answer — the turn list from where ``after_turn`` is (or
  its end), so the first later turn is followed; plus ``after_turn``'s own terminals, so a
  conversation that ends without a continuation closes the response with its error.
* A ``MultiplexListener`` (the conversation's event stream) gets every turn's chunks and no
  terminals (its status frames come from the status observers).
* A terminal entry with no execution id ends the whole turn (the takeover writes one).
* A terminal entry that names its new attempt (``retried_as``: a takeover with
  ``on_owner_loss = "retry"``) does not end a listener that follows that execution: the
  listener moves on to the new ``(turn, execution)``, whose log is followed from its start, so
  the client's one response carries the partial answer, the ``data-retry`` chunk, then the
  whole new answer and its end.
* A chunk whose seq the listener already got for its execution is not given again (a log its
  owner wrote again after Redis lost it, ``LogWriter``'s restore, holds the same entries with
  new ids).
* ``close()`` (the connection closed) unwatches everything; nothing here ever stops a stream.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

import anyio.abc

from drupe.cluster.log_encoding import LogEntry
from drupe.cluster.log_writer import turns_key
from drupe.streaming.listeners.base import StreamEvent, TerminalResult
from drupe.streaming.listeners.sse import MultiplexListener

if TYPE_CHECKING:
    from drupe.cluster.node import ClusterNode

__all__ = ["FollowingListener", "LogFollower", "terminal_of"]


def terminal_of(conversation_id: str, turn_id: str, entry: LogEntry) -> TerminalResult:
    """A terminal entry as the ``TerminalResult`` an in-process listener would get."""
    status = entry.terminal if entry.terminal in ("success", "paused", "error") else "error"
    return TerminalResult(
        status=status,  # type: ignore[arg-type]
        conversation_id=conversation_id,
        turn_id=turn_id,
        execution_id=entry.execution_id,
        model_id="",
        attempt_id=0,
        anchor_message_id=None,
        final_message=None,
        is_conversation_done=entry.done,
        error=entry.error,
        reason=entry.reason,
    )


class FollowingListener(Protocol):
    """What a follower feeds besides ``SseListener``: the gateway's ``PromptListener`` too."""

    @property
    def target(self) -> tuple[str, str] | None: ...

    def on_chunk(self, event: StreamEvent) -> None: ...

    def end_with(self, result: TerminalResult) -> None: ...

    def follow(self, turn_id: str, execution_id: str) -> None: ...

    def is_alive(self) -> bool: ...


class LogFollower:
    """Feeds one ``SseListener`` from the log; see the module docstring."""

    def __init__(
        self,
        node: ClusterNode,
        conversation_id: str,
        listener: FollowingListener | MultiplexListener,
        task_group: anyio.abc.TaskGroup,
    ) -> None:
        self.node = node
        self.conversation_id = conversation_id
        self.listener = listener
        self._tg = task_group
        self._unwatch: list[Callable[[], None]] = []
        self._followed: set[str] = set()
        self._closed = False
        self._last_seq: dict[tuple[str, str], int] = {}
        """(turn, execution) -> the newest seq given to the listener."""

    async def follow_turn(self, turn_id: str, *, after: int | None = None) -> None:
        if turn_id in self._followed or self._closed:
            return
        self._followed.add(turn_id)
        key = self.node.log.key(self.conversation_id, turn_id)

        def deliver(entry: LogEntry) -> None:
            self._deliver(turn_id, entry, after)

        self._unwatch.append(await self.node.reader.watch(key, "0", deliver))
        if self._closed:
            self.close()

    async def follow_next(self, after_turn_id: str | None) -> None:
        if after_turn_id is not None:
            await self.follow_turn(after_turn_id)
        key = turns_key(self.node.prefix, self.conversation_id)
        start = await self._position_of(key, after_turn_id)

        def on_turn(entry: LogEntry) -> None:
            turn_id = entry.execution_id  # the turn list carries the turn id in ``e``
            if turn_id and turn_id != after_turn_id and turn_id not in self._followed:
                self._tg.start_soon(self.follow_turn, turn_id)

        self._unwatch.append(await self.node.reader.watch(key, start, on_turn))

    async def _position_of(self, key: str, turn_id: str | None) -> str:
        """The turn list's entry of ``turn_id`` (or its newest entry; "0" when empty)."""
        rows: Any = await self.node.redis.xrevrange(key, count=64)
        newest = "0"
        for index, (entry_id, fields) in enumerate(rows or ()):
            text = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
            if index == 0:
                newest = text
            value = fields.get(b"e", fields.get("e"))
            value = value.decode() if isinstance(value, bytes) else value
            if turn_id is not None and value == turn_id:
                return text
        return newest

    def _deliver(self, turn_id: str, entry: LogEntry, after: int | None) -> None:
        listener = self.listener
        if entry.terminal is not None:
            if isinstance(listener, MultiplexListener):
                return  # its status frames come from the status observers
            if entry.retried_as is not None and listener.target == (turn_id, entry.execution_id):
                new_turn, new_execution = entry.retried_as
                listener.follow(new_turn, new_execution)
                self._tg.start_soon(self.follow_turn, new_turn)
                return
            result = terminal_of(self.conversation_id, turn_id, entry)
            if not entry.execution_id and listener.target is not None:
                # A turn-wide terminal (a takeover of a turn whose executions never wrote).
                result = replace(result, execution_id=listener.target[1])
            listener.end_with(result)
        else:
            slot = (turn_id, entry.execution_id)
            last = self._last_seq.get(slot, 0)
            for chunk, seq in zip(
                entry.chunks, entry.seqs or (0,) * len(entry.chunks), strict=True
            ):
                if after is not None and seq <= after:
                    continue
                if seq:
                    if seq <= last:
                        continue  # given already (a log its owner wrote again: a restore)
                    last = self._last_seq[slot] = seq
                listener.on_chunk(
                    StreamEvent(
                        conversation_id=self.conversation_id,
                        turn_id=turn_id,
                        execution_id=entry.execution_id,
                        attempt_id=0,
                        anchor_message_id=None,
                        seq=seq,
                        chunk=chunk,
                    )
                )
        if not listener.is_alive():
            self.close()

    def close(self) -> None:
        self._closed = True
        undo, self._unwatch = self._unwatch, []
        for unwatch in undo:
            unwatch()
