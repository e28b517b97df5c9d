"""The persistence clock: strictly increasing, timezone-aware UTC timestamps.

Rows written in one transaction (a user row and its placeholders) must keep their order when
sorted by ``created_at``, and two writes in the same microsecond must not tie. ``utc_now`` never
returns the same value twice in a process and never goes backwards, even if the wall clock does.
It never blocks and never raises.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

__all__ = ["utc_now"]

_ONE_MICROSECOND = timedelta(microseconds=1)
_lock = threading.Lock()
_last = datetime.min.replace(tzinfo=UTC)


def utc_now() -> datetime:
    """Return the current UTC time, strictly later than any value returned before."""
    global _last
    with _lock:
        now = datetime.now(UTC)
        if now <= _last:
            now = _last + _ONE_MICROSECOND
        _last = now
        return now
