"""The records ``ScheduleStore`` returns, built from its rows, and the shape of a delivery list.

``ScheduleRecord`` (a scheduled task) and ``TaskRunRecord`` (one run of a task) are frozen
values; ``schedule_record`` and ``run_record`` copy an ORM row into one (no SQL issued, nothing
shared with the session). ``deliver_targets`` normalises a ``deliver_to`` list to
``[{channel, chat}]`` with non-empty strings or raises ``ValidationError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from drupe.errors import ValidationError
from drupe.persistence.tables import ScheduleRow, TaskRunRow

__all__ = [
    "ScheduleRecord",
    "TaskRunRecord",
    "deliver_targets",
    "run_record",
    "schedule_record",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleRecord:
    """A scheduled agent task as stored: its trigger, options and next occurrence."""

    id: str
    name: str
    agent_id: str
    kind: str
    prompt: str
    trigger: dict[str, Any]
    timeout_minutes: int
    session_mode: str
    sticky_session_id: str | None
    deliver_to: tuple[dict[str, Any], ...]
    missed_policy: str
    enabled: bool
    next_run_at: datetime | None
    last_run_at: datetime | None
    created_at: datetime
    updated_at: datetime
    owner_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskRunRecord:
    """One run of an agent task as stored: what ran, when, and how it ended."""

    id: str
    schedule_id: str | None
    kind: str
    agent_id: str | None
    session_id: str | None
    conversation_id: str | None
    message_id: str | None
    scheduled_for: datetime | None
    started_at: datetime
    finished_at: datetime | None
    status: str
    result: str | None
    error: str | None
    duration_ms: int | None
    node_id: str | None = None


def schedule_record(row: ScheduleRow) -> ScheduleRecord:
    return ScheduleRecord(
        id=row.id,
        name=row.name,
        agent_id=row.agent_id,
        kind=row.kind,
        prompt=row.prompt,
        trigger=dict(row.trigger),
        timeout_minutes=row.timeout_minutes,
        session_mode=row.session_mode,
        sticky_session_id=row.sticky_session_id,
        deliver_to=tuple(dict(item) for item in row.deliver_to or ()),
        missed_policy=row.missed_policy,
        enabled=row.enabled,
        next_run_at=row.next_run_at,
        last_run_at=row.last_run_at,
        created_at=row.created_at,
        updated_at=row.updated_at,
        owner_id=row.owner_id,
    )


def run_record(row: TaskRunRow) -> TaskRunRecord:
    return TaskRunRecord(
        id=row.id,
        schedule_id=row.schedule_id,
        kind=row.kind,
        agent_id=row.agent_id,
        session_id=row.session_id,
        conversation_id=row.conversation_id,
        message_id=row.message_id,
        scheduled_for=row.scheduled_for,
        started_at=row.started_at,
        finished_at=row.finished_at,
        status=row.status,
        result=row.result,
        error=row.error,
        duration_ms=row.duration_ms,
        node_id=row.node_id,
    )


def deliver_targets(items: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Normalise ``[{channel, chat}]`` (both non-empty strings); raise ``ValidationError``."""
    out: list[dict[str, str]] = []
    for item in items:
        channel, chat = item.get("channel"), item.get("chat")
        if not isinstance(channel, str) or not channel or not isinstance(chat, str) or not chat:
            raise ValidationError("deliver_to: each entry needs a non-empty 'channel' and 'chat'")
        out.append({"channel": channel, "chat": chat})
    return out
