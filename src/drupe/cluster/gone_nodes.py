"""``GoneNodes``: the pure rule of when a node counts as gone (its task runs are then failed).

Contract: ``observe(alive, now)`` takes one look at the nodes that have running task runs
(node id -> whether its heartbeat key exists now) and returns the nodes that are gone: those whose
heartbeat has been missing in every look for at least ``ttl`` seconds. A heartbeat seen again
resets the node; a node no longer observed is forgotten. One missed look is never enough: after
a Redis restart every heartbeat is missing until each node's next beat (a third of the TTL), so
a live node is never declared gone by it.

Pure: no clock, no I/O; the sweep (``drupe.cluster.takeover``) owns both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["GoneNodes"]


@dataclass(slots=True)
class GoneNodes:
    ttl: float
    missing_since: dict[str, float] = field(default_factory=dict)

    def observe(self, alive: Mapping[str, bool], now: float) -> set[str]:
        since = {
            node: self.missing_since.get(node, now)
            for node, beating in alive.items()
            if not beating
        }
        self.missing_since = since
        return {node for node, first in since.items() if now - first >= self.ttl}
