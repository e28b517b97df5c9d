"""``ClusterRecord``: one conversation's status as the cluster shares it, and the merge rule.

Contract (``docs/lifecycles/cluster.md``, "Cluster-wide status"):

* A record is the conversation it describes, what a node's stream manager reported
  (``status``, ``turn_id``, ``last_completed_at``), who reported it (``node``), when (``at``,
  the node's wall clock in seconds) and its place in Redis's order (``seq``, from one counter
  per cluster; 0 for a record not yet written). Its wire form, the same in the hash and on
  the channel, is compact JSON:
  ``{conversationId, status, turnId, node, lastCompletedAt, at, seq}``.
* ``supersedes(current, incoming)``: the one rule by which the Redis hash and every node's view
  accept a record. A record of the same turn always replaces the current one (a node writes one
  turn's changes in order; a takeover settles the same turn). A record of another turn replaces
  it only when its turn is newer: turn ids are ``<epoch-ms>:<seq>`` and compare as that pair, so
  a late terminal of an older turn (an owner whose writes were delayed) never hides the newer
  turn another node is streaming. An id of another shape is accepted (Redis order decides).
  This assumes node clocks agree to well within a lease handover (NTP does).

Pure: no I/O, no clock. The Lua script in ``status`` applies the same rule inside Redis.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

import orjson

__all__ = [
    "LIVE_STATUSES",
    "ClusterRecord",
    "decode_record",
    "supersedes",
    "turn_order",
]

LIVE_STATUSES: Final = frozenset(("pending", "streaming"))
"""Statuses of a stream still running on its node (the rest are terminal or waiting)."""

_TURN: Final = re.compile(r"(\d+):(\d+)")


@dataclass(frozen=True, slots=True)
class ClusterRecord:
    """One conversation's shared status; see the module docstring."""

    conversation_id: str
    status: str
    turn_id: str
    node: str
    at: float
    last_completed_at: float | None = None
    seq: int = 0

    @property
    def live(self) -> bool:
        return self.status in LIVE_STATUSES


def turn_order(turn_id: str) -> tuple[int, int] | None:
    """``<epoch-ms>:<seq>`` as a comparable pair; ``None`` for any other shape."""
    match = _TURN.fullmatch(turn_id)
    return None if match is None else (int(match[1]), int(match[2]))


def supersedes(current: ClusterRecord | None, incoming: ClusterRecord) -> bool:
    """Whether ``incoming`` replaces ``current`` (see the module docstring)."""
    if current is None or current.turn_id == incoming.turn_id:
        return True
    before, after = turn_order(current.turn_id), turn_order(incoming.turn_id)
    return before is None or after is None or after > before


def decode_record(raw: bytes | str) -> ClusterRecord:
    """A record from its wire form; raises ``ValueError`` on anything malformed."""
    try:
        value: Any = orjson.loads(raw)
        completed = value.get("lastCompletedAt")
        return ClusterRecord(
            conversation_id=str(value["conversationId"]),
            status=str(value["status"]),
            turn_id=str(value["turnId"]),
            node=str(value["node"]),
            at=float(value["at"]),
            last_completed_at=None if completed is None else float(completed),
            seq=int(value.get("seq", 0)),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"malformed status record: {raw!r:.200}") from err
