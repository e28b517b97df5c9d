"""``StatusBook``: the latest status record of each conversation, and its observers.

Contract:

* ``record`` replaces a conversation's record (keeping ``last_completed_at``) and calls every
  observer synchronously, in registration order; an observer that raises is logged and skipped.
* A record survives the stream's eviction, so ``status`` answers after the grace period.
* ``forget`` drops a conversation's record (it was deleted).
* Bounded: at most ``max_records`` records (least recently written first out), except that a
  record ``pinned(conversation_id)`` says is still in use (its stream is registered: live, in
  grace or held) is never evicted. An evicted conversation reads as ``None`` (idle), which is
  what it is: nothing is live and its outcome is in the database. So the map holds at most
  ``max(max_records, registered streams)`` records however many conversations ever streamed.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

from drupe.streaming.contracts import StatusObserver, StatusRecord

__all__ = ["DEFAULT_MAX_RECORDS", "StatusBook", "evict_unpinned"]

V = TypeVar("V")

DEFAULT_MAX_RECORDS = 10_000
"""Status records kept for conversations whose stream has left the registry."""


def evict_unpinned(
    entries: OrderedDict[str, V], limit: int, pinned: Callable[[str, V], bool]
) -> int:
    """Drop the oldest entries that are not pinned until at most ``limit`` remain.

    A pinned entry met on the way is moved to the newest end (it is in use), so each call
    looks at every entry at most once; returns how many entries were dropped.
    """
    dropped = 0
    budget = len(entries)
    while len(entries) > limit and budget > 0:
        budget -= 1
        key, value = next(iter(entries.items()))
        if pinned(key, value):
            entries.move_to_end(key)
            continue
        del entries[key]
        dropped += 1
    return dropped


log = logging.getLogger(__name__)


class StatusBook:
    """``conversation id -> StatusRecord`` plus the status observers."""

    def __init__(
        self,
        *,
        max_records: int = DEFAULT_MAX_RECORDS,
        pinned: Callable[[str], bool] = lambda conversation_id: False,
    ) -> None:
        if max_records < 1:
            raise ValueError("max_records must be >= 1")
        self.max_records = max_records
        self._pinned = pinned
        self.records: OrderedDict[str, StatusRecord] = OrderedDict()
        self.evicted = 0
        self._observers: list[StatusObserver] = []

    def __len__(self) -> int:
        return len(self.records)

    @property
    def observer_count(self) -> int:
        return len(self._observers)

    def add_observer(self, observer: StatusObserver) -> Callable[[], None]:
        """Call ``observer(conversation_id, record)`` on every change; returns the remover."""
        self._observers.append(observer)
        return lambda: self._observers.remove(observer) if observer in self._observers else None

    def get(self, conversation_id: str) -> StatusRecord | None:
        return self.records.get(conversation_id)

    def record(self, conversation_id: str, status: str, turn_id: str) -> StatusRecord:
        """Store the conversation's new status and tell the observers."""
        previous = self.records.get(conversation_id)
        record = StatusRecord(
            status=status,
            turn_id=turn_id,
            last_completed_at=previous.last_completed_at if previous else None,
        )
        self.records[conversation_id] = record
        self.records.move_to_end(conversation_id)
        if len(self.records) > self.max_records:
            self.evicted += evict_unpinned(
                self.records, self.max_records, lambda key, _: self._pinned(key)
            )
        for observer in list(self._observers):
            try:
                observer(conversation_id, record)
            except Exception:  # isolation boundary: status observers
                log.exception("status observer raised")
        return record

    def mark_completed(self, conversation_id: str, turn_id: str, at: float) -> None:
        """Stamp ``last_completed_at`` when the record still describes ``turn_id``."""
        record = self.records.get(conversation_id)
        if record is not None and record.turn_id == turn_id:
            record.last_completed_at = at

    def forget(self, conversation_id: str) -> None:
        self.records.pop(conversation_id, None)
