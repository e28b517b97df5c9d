"""``HostSteps``: what the host's helpers may ask of the host (narrow seams, issue 19.5).

The helpers (``connections.ConnectionKeeper``, ``launch.Launcher``,
``agent_edits.apply_agent_update``) never hold the host. Each receives the stores, registries
and callables it uses, and the host's reducer loop through these steps:

* ``apply(entry, event)``: feed the session's reducer one event (the host performs the effects);
* ``is_current(entry)``: whether ``entry`` is still the session's live entry (re-checked after
  every await: a forgotten or replaced entry is never acted on);
* ``spawn(fn, *args)``: start a task in the host's task group (every task has that owner);
* ``settle_compaction(entry, reason)``: end a compaction nothing else will end;
* ``runtime_failed(entry, error)``: the connection ended under a turn, which ends ``error``;
* ``runtime_turn_started(entry)``: the runtime began a turn by itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from drupe.sessions.host import SessionEntry
    from drupe.sessions.session_events import Event

__all__ = ["HostSteps"]


@dataclass(frozen=True, slots=True, kw_only=True)
class HostSteps:
    """The host's reducer loop as its helpers see it (see the module docstring)."""

    apply: Callable[[SessionEntry, Event], None]
    is_current: Callable[[SessionEntry], bool]
    spawn: Callable[..., None]
    settle_compaction: Callable[[SessionEntry, str], None]
    runtime_failed: Callable[[SessionEntry, Mapping[str, Any]], None]
    runtime_turn_started: Callable[[SessionEntry], None]
