"""``PersistenceListener``: one model's answer, saved while it streams and at its terminal.

While streaming (only with a ``Checkpointer`` and a backend that names a checkpoint target):
every chunk of its own answer (same anchor message id) is reported to the checkpointer, which
saves the message into the ``pending`` row off the hot path (``drupe.streaming.checkpoints``).
The message saved is the one the execution accumulates itself (``StreamEvent.accumulator``): no
second copy of the answer is kept. Only for events that carry none (read from another node's
log) does the listener fold the chunks into an accumulator of its own (a rejected chunk is left
out and recorded, ``drupe.chunks.rejections``). ``on_chunk`` never awaits.

Terminal (``terminal_phase = "persistence"``, so it runs before every other listener):

1. it ignores terminals of other models (multi-model filter) and closes its checkpoint track;
2. an error adds exactly one ``data-error`` part to the (possibly synthetic) final message;
3. with no final message it finalizes an empty answer (``success`` included) when the backend
   says it persists empty terminals (placeholder rows must leave ``pending``), else skips;
4. it normalizes: open tool parts become ``output-error`` ("Interrupted by user" /
   "Stream errored before tool completed"), streaming reasoning becomes done, empty text and
   reasoning parts and transient ``data-retry`` parts are dropped;
5. the write is retried within the ``WritePolicy`` bounds (``write_with_retries``). When it still
   fails, the row is handed to the ``TerminalWriteRetrier`` (which marks it ``error`` and keeps
   retrying) or, without one, marked ``error`` (best effort); then it raises
   ``TerminalPersistenceError``, and the manager then ends every subscriber with an ``error``
   saying the answer could not be saved (counted in ``/metrics``). A write refused by fencing
   (``FencedWriteError``: in cluster mode a newer owner holds the conversation) is not retried
   nor marked: it raises ``TerminalPersistenceError`` at once and the row is the new owner's.

It never touches SQL: it talks to a ``PersistenceBackend``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, Protocol

import anyio

from drupe.chunks.accumulate import Accumulator
from drupe.chunks.normalize import (
    append_error_part,
    drop_transient_parts,
    finalize_interrupted_parts,
    strip_empty_parts,
)
from drupe.chunks.rejections import push_or_record
from drupe.chunks.types import UIMessage
from drupe.errors import FencedWriteError, TerminalPersistenceError
from drupe.streaming.checkpoints import Checkpointer, CheckpointSink, CheckpointTrack
from drupe.streaming.listeners.base import BaseListener, StreamEvent, TerminalPhase, TerminalResult
from drupe.streaming.terminal_writes import TerminalWriteRetrier, WritePolicy, write_with_retries

__all__ = ["PersistenceBackend", "PersistenceListener", "message_stats"]

log = logging.getLogger(__name__)


class PersistenceBackend(Protocol):
    """Where an answer is written (a placeholder row, an in-memory chat, ...)."""

    kind: str
    persists_empty_terminal: bool

    @property
    def checkpoint_target(self) -> tuple[CheckpointSink, str] | None:
        """Where checkpoints of the live answer go (sink, row key); ``None``: no checkpoints."""
        ...

    async def persist_assistant(
        self,
        *,
        message: UIMessage,
        status: Literal["success", "paused", "error"],
        model_id: str | None,
        stats: Mapping[str, Any],
    ) -> None:
        """Write the final message. May raise; the listener retries, then marks it ``error``."""

    async def mark_terminal_error(self) -> bool:
        """Move the row to ``error`` after a failed write; never raises. True when the row is
        no longer ``pending`` (marked, or settled already), False when the mark failed."""
        ...


def message_stats(result: TerminalResult, message: UIMessage | None) -> dict[str, Any]:
    """Timings and usage of one answer, for the row's ``stats`` column."""
    stats: dict[str, Any] = {}
    timings = result.timings
    started = timings.get("startedAt")
    if started:
        first = timings.get("firstChunkAt")
        if first:
            stats["timeFirstChunkMs"] = round(first - started, 1)
        completed = timings.get("completedAt")
        if completed:
            stats["timeCompletionMs"] = round(completed - started, 1)
    metadata = message.get("metadata") if message is not None else None
    if isinstance(metadata, dict):
        usage = metadata.get("usage")
        if isinstance(usage, dict):
            stats["usage"] = usage
    if result.reason:
        stats["reason"] = result.reason
    return stats


class PersistenceListener(BaseListener):
    """Saves one model's answer through a backend: checkpoints while live, then its terminal."""

    terminal_phase: TerminalPhase | None = "persistence"

    def __init__(
        self,
        backend: PersistenceBackend,
        *,
        model_id: str,
        conversation_id: str,
        after_persist: Callable[[UIMessage], Awaitable[None]] | None = None,
        checkpointer: Checkpointer | None = None,
        seed_message: UIMessage | None = None,
        write_policy: WritePolicy | None = None,
        retrier: TerminalWriteRetrier | None = None,
    ) -> None:
        super().__init__(f"persistence:{backend.kind}:{conversation_id}:{model_id}")
        self.backend = backend
        self.model_id = model_id
        self.after_persist = after_persist
        self.write_policy = write_policy or (retrier.policy if retrier else WritePolicy())
        self.retrier = retrier
        self.persisted: list[tuple[str, UIMessage]] = []
        self._checkpointer: Checkpointer | None = None
        self._track: CheckpointTrack | None = None
        self._anchor: str | None = None
        self._accumulator: Accumulator | None = None
        """The listener's own, made only for events that carry no accumulator."""
        self._live: Accumulator | None = None
        """The execution's accumulator, from the events (what a checkpoint saves)."""
        self._seed = seed_message
        self._rejected = 0
        target = backend.checkpoint_target
        if checkpointer is not None and checkpointer.policy.enabled and target is not None:
            sink, key = target
            self._checkpointer = checkpointer
            self._anchor = key
            self._track = checkpointer.track(key, sink, self._checkpoint_parts)

    def _checkpoint_parts(self) -> str:
        # As accumulated: the boot reconcile closes, strips and drops what a terminal write would.
        accumulator = self._live if self._live is not None else self._own()
        return accumulator.parts_json().decode()

    def _own(self) -> Accumulator:
        if self._accumulator is None:
            self._accumulator = Accumulator(self._seed)
        return self._accumulator

    # --- live ---------------------------------------------------------------------------------

    def on_chunk(self, event: StreamEvent) -> None:
        track = self._track
        if track is None or event.anchor_message_id != self._anchor:
            return
        chunk = event.chunk
        if chunk.get("transient"):
            return
        assert self._checkpointer is not None
        if event.accumulator is not None:
            self._live = event.accumulator
        else:
            self._live = None
            self._rejected = push_or_record(self._own(), chunk, self._rejected)
        self._checkpointer.changed(track, len(event.json))

    # --- terminal -----------------------------------------------------------------------------

    async def on_done(self, result: TerminalResult) -> None:
        await self._persist(result)

    async def on_paused(self, result: TerminalResult) -> None:
        await self._persist(result)

    async def on_error(self, result: TerminalResult) -> None:
        await self._persist(result)

    async def _persist(self, result: TerminalResult) -> None:
        if result.model_id != self.model_id:
            return
        if self._track is not None and self._checkpointer is not None:
            self._checkpointer.close(self._track)
        message = result.final_message
        if message is None:
            if not self.backend.persists_empty_terminal:
                return
            message = {"id": result.anchor_message_id or "", "role": "assistant", "parts": []}
        if result.status == "error":
            message = append_error_part(message, result.error or {"name": "Error", "message": ""})
        if result.status != "success":
            message = finalize_interrupted_parts(message, result.status)
        message = strip_empty_parts(drop_transient_parts(message))
        write = functools.partial(
            self.backend.persist_assistant,
            message=message,
            status=result.status,
            model_id=result.model_id,
            stats=message_stats(result, message),
        )
        label = repr(result.anchor_message_id)
        try:
            await write_with_retries(write, self.write_policy, label=label)
        except FencedWriteError as err:
            # Cluster: this node lost the conversation; the new owner settles the row.
            log.warning("persisting %s was fenced: %s", label, err)
            raise TerminalPersistenceError(f"could not persist message {label}: {err}") from err
        except Exception as err:  # isolation boundary: a failed terminal write
            log.exception("persisting %s failed after retries", label)
            if self.retrier is None or not self.retrier.submit(
                write, self.backend.mark_terminal_error, label=label
            ):
                with anyio.move_on_after(self.write_policy.attempt_timeout):
                    await self.backend.mark_terminal_error()
            raise TerminalPersistenceError(f"could not persist message {label}") from err
        self.persisted.append((result.status, message))
        if result.status == "success" and self.after_persist is not None:
            try:
                await self.after_persist(message)
            except Exception:  # isolation boundary: after-persist hooks only log
                log.exception("after-persist hook of %s failed", label)
