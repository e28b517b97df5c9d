"""Stream manager configuration: explicit defaults and limits (reference §2.1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["BackgroundMode", "StreamConfig"]

BackgroundMode = Literal["continue", "abort"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamConfig:
    """Every knob of the stream manager; the defaults are the reference's."""

    grace_period: float = 30.0
    """Seconds a terminal stream stays attachable (final messages) before eviction."""
    background_mode: BackgroundMode = "continue"
    """What happens when the last subscriber is gone: keep going, or abort (``no-subscribers``)."""
    max_buffer_chunks: int = 10_000
    """Replay ring capacity per execution, in entries (merged delta runs count once)."""
    max_delta_bytes: int = 16_384
    """Largest merged delta entry, in UTF-8 bytes."""
    idle_timeout: float = 1800.0
    """Seconds without a chunk before the watchdog ends the turn ``paused``."""
    approval_idle_timeout: float = 7200.0
    """The idle bound while an approval is pending."""
    max_listeners: int = 1_000
    """Subscribers per conversation; one more is refused."""
    terminal_timeout: float = 30.0
    """Upper bound, in seconds, of the shielded terminal work of one execution."""
    shutdown_grace: float = 5.0
    """Seconds live streams get to settle at shutdown after being aborted."""
    max_status_records: int = 10_000
    """Status records kept for conversations with no registered stream (oldest out first)."""

    def __post_init__(self) -> None:
        if self.max_buffer_chunks < 1:
            raise ValueError("max_buffer_chunks must be >= 1")
        if self.max_delta_bytes < 16:
            raise ValueError("max_delta_bytes must be >= 16")
        if self.max_status_records < 1:
            raise ValueError("max_status_records must be >= 1")
        if self.max_listeners < 1:
            raise ValueError("max_listeners must be >= 1")
        if self.grace_period < 0 or self.idle_timeout <= 0:
            raise ValueError("grace_period must be >= 0 and idle_timeout > 0")
