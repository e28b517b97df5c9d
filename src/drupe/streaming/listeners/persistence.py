"""``PersistenceListener``: the terminal write of one model's answer (reference §3.4).

Terminal-only (``terminal_phase = "persistence"``, so it runs before every other listener):

1. it ignores terminals of other models (multi-model filter);
2. an error adds exactly one ``data-error`` part to the (possibly synthetic) final message;
3. with no final message it skips a ``success``, and finalizes an empty ``paused``/``error``
   only when the backend says it can (placeholder rows must leave ``pending``);
4. it normalizes: open tool parts become ``output-error`` ("Interrupted by user" /
   "Stream errored before tool completed"), streaming reasoning becomes done, empty text and
   reasoning parts and transient ``data-retry`` parts are dropped;
5. a failed write marks the row ``error`` (best effort) and raises
   ``TerminalPersistenceError``: the manager then ends every subscriber with an ``error`` saying
   the answer could not be saved (and counts it in ``/metrics``).

It never touches SQL: it talks to a ``PersistenceBackend``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, Protocol

from drupe.chunks.normalize import (
    append_error_part,
    drop_transient_parts,
    finalize_interrupted_parts,
    strip_empty_parts,
)
from drupe.chunks.types import UIMessage
from drupe.errors import TerminalPersistenceError
from drupe.streaming.listeners.base import BaseListener, TerminalPhase, TerminalResult

__all__ = ["PersistenceBackend", "PersistenceListener", "message_stats"]

log = logging.getLogger(__name__)


class PersistenceBackend(Protocol):
    """Where a terminal answer is written (a placeholder row, an in-memory chat, ...)."""

    kind: str
    persists_empty_terminal: bool

    async def persist_assistant(
        self,
        *,
        message: UIMessage,
        status: Literal["success", "paused", "error"],
        model_id: str | None,
        stats: Mapping[str, Any],
    ) -> None:
        """Write the final message. May raise; the listener then marks the row ``error``."""

    async def mark_terminal_error(self) -> None:
        """Best effort: move the row to ``error`` after a failed write."""


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
    """Writes one model's terminal result through a backend."""

    terminal_phase: TerminalPhase | None = "persistence"

    def __init__(
        self,
        backend: PersistenceBackend,
        *,
        model_id: str,
        conversation_id: str,
        after_persist: Callable[[UIMessage], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(f"persistence:{backend.kind}:{conversation_id}:{model_id}")
        self.backend = backend
        self.model_id = model_id
        self.after_persist = after_persist
        self.persisted: list[tuple[str, UIMessage]] = []

    async def on_done(self, result: TerminalResult) -> None:
        await self._persist(result)

    async def on_paused(self, result: TerminalResult) -> None:
        await self._persist(result)

    async def on_error(self, result: TerminalResult) -> None:
        await self._persist(result)

    async def _persist(self, result: TerminalResult) -> None:
        if result.model_id != self.model_id:
            return
        message = result.final_message
        if message is None:
            if result.status == "success" or not self.backend.persists_empty_terminal:
                return
            message = {"id": result.anchor_message_id or "", "role": "assistant", "parts": []}
        if result.status == "error":
            message = append_error_part(message, result.error or {"name": "Error", "message": ""})
        if result.status != "success":
            message = finalize_interrupted_parts(message, result.status)
        message = strip_empty_parts(drop_transient_parts(message))
        try:
            await self.backend.persist_assistant(
                message=message,
                status=result.status,
                model_id=result.model_id,
                stats=message_stats(result, message),
            )
        except Exception as err:  # isolation boundary: a failed terminal write
            log.exception("persisting %r failed; marking it error", result.anchor_message_id)
            try:
                await self.backend.mark_terminal_error()
            except Exception:  # isolation boundary: best effort
                log.exception("marking %r error failed too", result.anchor_message_id)
            raise TerminalPersistenceError(
                f"could not persist message {result.anchor_message_id!r}"
            ) from err
        self.persisted.append((result.status, message))
        if result.status == "success" and self.after_persist is not None:
            try:
                await self.after_persist(message)
            except Exception:  # isolation boundary: after-persist hooks only log
                log.exception("after-persist hook of %r failed", result.anchor_message_id)
