"""The pure decisions of a takeover (cluster mode): what is answered again, how the log ends.

Contract (``docs/lifecycles/cluster.md``, the ``on_owner_loss`` rows; ``chat.py`` is the shell):

* ``retry_plan(rows, attempts, limit)``: ``rows`` are the conversation's messages. The lost
  answers are the ``pending`` assistant rows with a parent and a model. The user message of the
  newest of them (by ``created_at``) is answered again, with the models of its lost answers in
  row order; returns ``RetryPlan`` or None when nothing is lost or ``attempts`` (the count of
  retries of that message including this one) is above ``limit``.
* ``lost_parent(rows)``: that user message's id, or None (the shell counts attempts per message).
* ``row_anchors(raw)``: a turn's anchors hash as execution id -> row id; the fields ``#<n>``
  (the log's numbering of ids, ``chunk_log.py``) and ``~<mark>`` (marks such as ``~fd``,
  ``chunk_log.FEED_NAMED``, and earlier versions' ``~feed``) are not anchors.
* ``log_endings(entries, anchors, retried)``: every execution that wrote to the log without a
  terminal, in order of first appearance, then the turn-wide end (execution ``""``), each as an
  ``Ending``. An execution whose row is in ``retried`` (row id -> ``(turn, execution)``) points
  to its new attempt and gets the seq of its ``data-retry`` chunk: above every seq of the log,
  one more per retried execution. The turn-wide end never points anywhere.

No I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from drupe.cluster.log_encoding import LogEntry

__all__ = ["Ending", "RetryPlan", "log_endings", "lost_parent", "retry_plan", "row_anchors"]


class Row(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def parent_id(self) -> str | None: ...
    @property
    def model_id(self) -> str | None: ...
    @property
    def created_at(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class RetryPlan:
    user_message_id: str
    model_ids: tuple[str, ...]
    row_ids: tuple[str, ...]
    """The lost rows, in the order of ``model_ids``."""


@dataclass(frozen=True, slots=True)
class Ending:
    execution_id: str
    retried_as: tuple[str, str] | None = None
    retry_seq: int = 0
    """The seq of the ``data-retry`` chunk written before a retried execution's terminal."""


def _lost(rows: Iterable[Row]) -> list[Row]:
    return [
        r
        for r in rows
        if r.role == "assistant" and r.status == "pending" and r.parent_id and r.model_id
    ]


def lost_parent(rows: Sequence[Row]) -> str | None:
    lost = _lost(rows)
    if not lost:
        return None
    return max(lost, key=lambda r: r.created_at).parent_id


def retry_plan(rows: Sequence[Row], attempts: int, limit: int) -> RetryPlan | None:
    parent = lost_parent(rows)
    if parent is None or attempts > limit:
        return None
    lost = [r for r in _lost(rows) if r.parent_id == parent]
    return RetryPlan(
        user_message_id=parent,
        model_ids=tuple(str(r.model_id) for r in lost),
        row_ids=tuple(r.id for r in lost),
    )


def row_anchors(raw: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in raw.items() if not k.startswith(("#", "~"))}


def log_endings(
    entries: Iterable[LogEntry],
    anchors: Mapping[str, str],
    retried: Mapping[str, tuple[str, str]],
) -> list[Ending]:
    seen: list[str] = []
    ended: set[str] = set()
    last_seq = 0
    for entry in entries:
        if entry.seqs:
            last_seq = max(last_seq, *entry.seqs)
        if entry.terminal is not None:
            ended.add(entry.execution_id)
        elif entry.execution_id not in seen:
            seen.append(entry.execution_id)
    endings: list[Ending] = []
    for execution_id in (e for e in seen if e not in ended):
        new_attempt = retried.get(anchors[execution_id]) if execution_id in anchors else None
        if new_attempt is None:
            endings.append(Ending(execution_id))
        else:
            last_seq += 1
            endings.append(Ending(execution_id, new_attempt, last_seq))
    endings.append(Ending(""))
    return endings
