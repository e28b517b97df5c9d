"""``RetryPolicy``: how often and how patiently the agent loop tries a failed step again.

Pure values and arithmetic, cheap to import: every ``TurnRequest`` carries a policy, and building
one must not import pydantic-ai (nor must the gateway's pass-through, which also reads
``RETRYABLE_STATUS`` and ``parse_retry_after`` from here). Which failures are retryable is
``drupe.agent.retry``'s (``classify`` builds the ``FailureInfo`` that ``delay_for`` reads).
"""

from __future__ import annotations

import email.utils
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from drupe.agent.retry import FailureInfo

__all__ = ["RETRYABLE_STATUS", "RetryPolicy", "parse_retry_after"]

RETRYABLE_STATUS: frozenset[int] = frozenset((408, 409, 429))
"""HTTP statuses worth another try (besides 5xx)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How often and how patiently a failed step is tried again."""

    attempts: int = 3
    """Total tries of one step, the first included (``1`` disables retries)."""
    base_delay: float = 1.0
    """Seconds before the second try; doubles per try."""
    max_delay: float = 20.0
    """Cap of the exponential backoff, in seconds."""
    max_retry_after: float = 60.0
    """A provider-requested wait above this many seconds makes the failure final."""

    def backoff(self, failed_attempt: int) -> float:
        """Return the exponential delay after try number ``failed_attempt`` (1-based)."""
        exponent = max(failed_attempt - 1, 0)
        return float(min(self.base_delay * (2**exponent), self.max_delay))

    def delay_for(self, failed_attempt: int, info: FailureInfo) -> float | None:
        """Return the seconds to wait before the next try, or ``None`` when it must not retry."""
        if not info.retryable or failed_attempt >= self.attempts:
            return None
        if info.retry_after is not None:
            if info.retry_after > self.max_retry_after:
                return None
            return max(info.retry_after, 0.0)
        return self.backoff(failed_attempt)


def parse_retry_after(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Return the wait in seconds from ``retry-after-ms`` or ``Retry-After`` (or an HTTP date)."""
    lowered = {key.lower(): value for key, value in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            millis = float(raw_ms)
        except ValueError:
            millis = -1.0
        if 0 <= millis < float("inf"):
            return millis / 1000
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        pass
    else:
        return seconds if 0 <= seconds < float("inf") else None
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = now if now is not None else datetime.now(UTC)
    return max((when - current).total_seconds(), 0.0)
