"""``StatusBook``: the latest status record of each conversation, and its observers.

Contract:

* ``record`` replaces a conversation's record (keeping ``last_completed_at``) and calls every
  observer synchronously, in registration order; an observer that raises is logged and skipped.
* A record survives the stream's eviction, so ``status`` answers after the grace period.
* ``forget`` drops a conversation's record (it was deleted).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from drupe.streaming.contracts import StatusObserver, StatusRecord

__all__ = ["StatusBook"]

log = logging.getLogger(__name__)


class StatusBook:
    """``conversation id -> StatusRecord`` plus the status observers."""

    def __init__(self) -> None:
        self.records: dict[str, StatusRecord] = {}
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
