"""Persistence backends: where the persistence listener writes a turn's terminal message.

Each backend structurally satisfies ``drupe.streaming.listeners.persistence.PersistenceBackend``
(this module does not import ``streaming``; the dependency points the other way):

* ``kind`` names the storage (``"sqlite"``, ``"postgresql"`` or ``"memory"``);
* ``persists_empty_terminal`` says whether a ``paused``/``error`` turn with no message must still
  be written (placeholder-finalizing backends: the row must leave ``pending``);
* ``persist_assistant`` writes the final message. It may raise (``PersistenceError``); the
  listener then calls ``mark_terminal_error`` and suppresses success notifications. It is called
  at most once per turn, from the stream's terminal phase, shielded by the caller;
* ``mark_terminal_error`` is best effort and never raises: it moves the row to ``error`` and
  says whether the row has left ``pending``;
* ``checkpoint_target`` names where checkpoints of the live answer go: the ``MessageStore``
  (its ``write_checkpoints`` takes a batch of rows) and the row's id.

A ``PlaceholderBackend`` given a ``fence`` (cluster mode: the owner's fencing token) writes
everything fenced: the terminal write (``FencedWriteError`` once a newer owner took the row
over), the best-effort ``error`` mark, and the checkpoints (its target is the store's
``FencedCheckpoints`` sink of that token).

``PlaceholderBackend`` holds no SQL: it delegates to ``MessageStore``. (The in-memory backend of
ephemeral conversations lives with its provider in ``drupe.admission.ephemeral``.)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

from drupe.chunks.types import UIMessage
from drupe.errors import PersistenceError
from drupe.persistence.checkpoints import FencedCheckpoints
from drupe.persistence.messages import MessageStore
from drupe.persistence.records import TerminalStatus

__all__ = ["PlaceholderBackend"]

_log: Final = logging.getLogger(__name__)


class PlaceholderBackend:
    """Finalizes one ``pending`` assistant placeholder row of the database."""

    persists_empty_terminal: bool = True

    def __init__(self, store: MessageStore, message_id: str, *, fence: int | None = None) -> None:
        self._store = store
        self.message_id = message_id
        self.fence = fence
        """The owner's fencing token (cluster mode); None: unfenced single-node writes."""
        self.kind: str = store.dialect
        self.checkpoint_target: tuple[MessageStore | FencedCheckpoints, str] | None = (
            (store, message_id) if fence is None else (store.fenced_checkpoints(fence), message_id)
        )

    async def persist_assistant(
        self,
        *,
        message: UIMessage,
        status: TerminalStatus,
        model_id: str | None,
        stats: Mapping[str, Any],
    ) -> None:
        """Write the final parts, status, metadata and stats into the placeholder row.

        The row keeps its own id (the message's ``id`` may be a synthetic one). Raises
        ``PersistenceError`` when the row is gone or the write fails (``FencedWriteError``
        when a newer owner holds the conversation).
        """
        await self._store.finalize_assistant(
            self.message_id,
            parts=message["parts"],
            status=status,
            metadata=message.get("metadata"),
            stats=stats,
            model_id=model_id,
            fence=self.fence,
        )

    async def mark_terminal_error(self) -> bool:
        """Move the placeholder to ``error`` if it is still ``pending``; never raises.

        True when the row is no longer ``pending`` (marked now, or settled before).
        """
        try:
            await self._store.mark_error(self.message_id, fence=self.fence)
        except PersistenceError:
            # Isolation boundary: the listener is already handling a failed terminal write.
            _log.warning("could not mark message %r as error", self.message_id, exc_info=True)
            return False
        return True
