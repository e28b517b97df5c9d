"""``RetryPolicy``: how often and how patiently the agent loop tries a failed step again.

Pure values and arithmetic, cheap to import: every ``TurnRequest`` carries a policy, and building
one must not import pydantic-ai. Which failures are retryable, and ``Retry-After``, are
``drupe.agent.retry``'s (``classify`` builds the ``FailureInfo`` that ``delay_for`` reads).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from drupe.agent.retry import FailureInfo

__all__ = ["RetryPolicy"]


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
