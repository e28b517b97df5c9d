"""``ConversationLocks``: one admission lock per conversation, alive only while it is used.

Contract: ``lock(conversation_id)`` is an async context manager that serialises its holders per
conversation (FIFO, anyio's fairness). An entry exists only while some task holds or waits for
it, so the map never grows with the number of conversations ever seen.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field

import anyio

__all__ = ["ConversationLocks"]


@dataclass(slots=True)
class _LockEntry:
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    refs: int = 0


class ConversationLocks:
    """Reference-counted per-conversation locks."""

    def __init__(self) -> None:
        self._entries: dict[str, _LockEntry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def lock(self, conversation_id: str) -> AbstractAsyncContextManager[None]:
        return self._locked(conversation_id)

    @asynccontextmanager
    async def _locked(self, conversation_id: str) -> AsyncIterator[None]:
        entry = self._entries.get(conversation_id)
        if entry is None:
            entry = self._entries[conversation_id] = _LockEntry()
        entry.refs += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.refs -= 1
            if entry.refs == 0:
                self._entries.pop(conversation_id, None)
