"""The MCP tool cache as a pure state machine: what ``list_tools`` answers, and when to refresh.

One ``CachedTools`` value per server. The hot path calls ``on_lookup`` and gets the tools to
return now plus whether a background refresh should start; it never waits for a server.

| state      | lookup returns | starts a background refresh                 |
|------------|----------------|---------------------------------------------|
| never      | []             | yes, unless one is in flight (single-flight)|
| ready      | the tools      | no (list-changed keeps it fresh)            |
| empty      | []             | only after 5 minutes                        |
| failed     | []             | only after the 30 s backoff                 |
| inactive   | []             | never                                       |

``on_success`` and ``on_failure`` are the transitions a finished refresh applies. Times are
floats from an injected monotonic clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from drupe.tools.base import ToolEntry

__all__ = [
    "EMPTY_TTL_S",
    "FAILURE_BACKOFF_S",
    "CacheState",
    "CachedTools",
    "on_failure",
    "on_inactive",
    "on_lookup",
    "on_success",
]

FAILURE_BACKOFF_S = 30.0
EMPTY_TTL_S = 300.0

CacheState = Literal["never", "ready", "empty", "failed", "inactive"]


@dataclass(frozen=True, slots=True)
class CachedTools:
    """What the catalog knows of one server's tools."""

    state: CacheState = "never"
    tools: tuple[ToolEntry, ...] = ()
    retry_at: float | None = None
    """For ``empty`` and ``failed``: when the hot path may ask again."""
    updated_at: float | None = None
    last_error: str | None = None


def on_lookup(cached: CachedTools, *, now: float, refreshing: bool) -> tuple[list[ToolEntry], bool]:
    """Return ``(tools to answer with, whether to start a background refresh)``."""
    state = cached.state
    if state == "ready":
        return list(cached.tools), False
    if state == "inactive":
        return [], False
    if state == "never":
        return [], not refreshing
    due = cached.retry_at is None or now >= cached.retry_at
    return [], due and not refreshing


def on_success(cached: CachedTools, tools: tuple[ToolEntry, ...], *, now: float) -> CachedTools:
    """A refresh listed ``tools``: ``ready``, or ``empty`` for 5 minutes."""
    if tools:
        return CachedTools("ready", tools, None, now, None)
    return CachedTools("empty", (), now + EMPTY_TTL_S, now, None)


def on_failure(cached: CachedTools, error: str, *, now: float) -> CachedTools:
    """A refresh failed: no tools, and no hot-path retry for 30 s."""
    return CachedTools("failed", (), now + FAILURE_BACKOFF_S, now, error)


def on_inactive(cached: CachedTools, *, now: float) -> CachedTools:
    """The server was deactivated: no tools, never refreshed on the hot path."""
    return CachedTools("inactive", (), None, now, None)
