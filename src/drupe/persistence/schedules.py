"""``ScheduleStore``: scheduled agent tasks (``schedules``) and their run history (``task_runs``).

The only code that issues SQL against those two tables. Times that decide something (a claim,
a run's start and end) are passed in by the caller, who owns the clock; only ``created_at`` and
``updated_at`` come from the wall clock.

Exactly-once firing: ``claim`` is one conditional ``UPDATE`` on the schedule row (``WHERE id = ?
AND enabled AND next_run_at = <the occurrence the caller saw>``). Of several processes that saw
the same occurrence, exactly one updates a row; the others get ``False`` and fire nothing. The
unique index on ``(schedule_id, scheduled_for)`` of ``task_runs`` backs this up: an occurrence can
have only one run row.

Every call is one transaction. Unknown ids raise ``ValidationError``.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from sqlalchemy import delete, or_, select, update

from drupe.errors import ValidationError
from drupe.persistence.clock import utc_now
from drupe.persistence.tables import ScheduleRow, TaskRunRow
from drupe.persistence.transaction import Transactions

__all__ = ["RESULT_CHARS", "ScheduleRecord", "ScheduleStore", "TaskRunRecord"]

RESULT_CHARS: Final = 200
"""A run row keeps the first 200 characters of the result."""
_SCHEDULE_FIELDS: Final = frozenset(
    (
        "name",
        "prompt",
        "trigger",
        "timeout_minutes",
        "session_mode",
        "sticky_session_id",
        "deliver_to",
        "missed_policy",
        "enabled",
        "next_run_at",
        "owner_id",
    )
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleRecord:
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


def _schedule(row: ScheduleRow) -> ScheduleRecord:
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


def _run(row: TaskRunRow) -> TaskRunRecord:
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


class ScheduleStore:
    """Schedules and task runs."""

    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions
        self.node_id: str | None = None
        """The cluster node this process is (set once at boot): written on every run it starts."""

    async def task_session_ids(self, session_ids: Collection[str]) -> set[str]:
        """Those of ``session_ids`` that a task run created or used (not opened by a person)."""
        if not session_ids:
            return set()
        query = (
            select(TaskRunRow.session_id)
            .where(TaskRunRow.session_id.in_(list(session_ids)))
            .distinct()
        )
        async with self._transactions.read() as db:
            return {sid for sid in (await db.scalars(query)).all() if sid is not None}

    # -- schedules ---------------------------------------------------------------------------

    async def create(self, *, agent_id: str, **values: Any) -> ScheduleRecord:
        unknown = set(values) - _SCHEDULE_FIELDS - {"kind", "id"}
        if unknown:
            raise ValidationError(f"unknown schedule fields: {sorted(unknown)}")
        now = utc_now()
        row = ScheduleRow(
            id=values.pop("id", None) or f"sch_{uuid.uuid4().hex}",
            agent_id=agent_id,
            kind=values.pop("kind", "task"),
            created_at=now,
            updated_at=now,
            last_run_at=None,
            **values,
        )
        async with self._transactions.write() as db:
            db.add(row)
        return _schedule(row)

    async def get(self, schedule_id: str) -> ScheduleRecord | None:
        async with self._transactions.read() as db:
            row = await db.get(ScheduleRow, schedule_id)
            return None if row is None else _schedule(row)

    async def list(
        self, *, agent_id: str | None = None, kind: str | None = None, owner_id: str | None = None
    ) -> builtins.list[ScheduleRecord]:
        query = select(ScheduleRow).order_by(ScheduleRow.created_at, ScheduleRow.id)
        if owner_id is not None:
            query = query.where(ScheduleRow.owner_id == owner_id)
        if agent_id is not None:
            query = query.where(ScheduleRow.agent_id == agent_id)
        if kind is not None:
            query = query.where(ScheduleRow.kind == kind)
        async with self._transactions.read() as db:
            return [_schedule(row) for row in (await db.scalars(query)).all()]

    async def update(self, schedule_id: str, **changes: Any) -> ScheduleRecord:
        unknown = set(changes) - _SCHEDULE_FIELDS
        if unknown:
            raise ValidationError(f"unknown schedule fields: {sorted(unknown)}")
        async with self._transactions.write() as db:
            row = await db.get(ScheduleRow, schedule_id)
            if row is None:
                raise ValidationError(f"unknown schedule {schedule_id!r}")
            for key, value in changes.items():
                setattr(row, key, value)
            row.updated_at = utc_now()
            return _schedule(row)

    async def delete(self, schedule_id: str) -> None:
        async with self._transactions.write() as db:
            gone = await db.scalar(
                delete(ScheduleRow).where(ScheduleRow.id == schedule_id).returning(ScheduleRow.id)
            )
            if gone is None:
                raise ValidationError(f"unknown schedule {schedule_id!r}")

    async def due(self, now: datetime) -> builtins.list[ScheduleRecord]:
        """Enabled schedules whose next occurrence is at or before ``now`` (oldest first)."""
        query = (
            select(ScheduleRow)
            .where(ScheduleRow.enabled.is_(True), ScheduleRow.next_run_at <= now)
            .order_by(ScheduleRow.next_run_at, ScheduleRow.id)
        )
        async with self._transactions.read() as db:
            return [_schedule(row) for row in (await db.scalars(query)).all()]

    async def next_wakeup(self) -> datetime | None:
        """The earliest next occurrence of any enabled schedule."""
        query = (
            select(ScheduleRow.next_run_at)
            .where(ScheduleRow.enabled.is_(True), ScheduleRow.next_run_at.is_not(None))
            .order_by(ScheduleRow.next_run_at)
            .limit(1)
        )
        async with self._transactions.read() as db:
            return await db.scalar(query)

    async def claim(
        self, schedule_id: str, *, expected: datetime, next_run_at: datetime | None, now: datetime
    ) -> bool:
        """Move the schedule past the occurrence ``expected``; True for the one caller that did."""
        statement = (
            update(ScheduleRow)
            .where(
                ScheduleRow.id == schedule_id,
                ScheduleRow.enabled.is_(True),
                ScheduleRow.next_run_at == expected,
            )
            .values(next_run_at=next_run_at, last_run_at=now, updated_at=utc_now())
            .execution_options(synchronize_session=False)
        )
        async with self._transactions.write() as db:
            result = await db.execute(statement)
            return bool(result.rowcount == 1)  # type: ignore[attr-defined]

    async def bind_sticky(self, schedule_id: str, session_id: str) -> None:
        async with self._transactions.write() as db:
            await db.execute(
                update(ScheduleRow)
                .where(ScheduleRow.id == schedule_id)
                .values(sticky_session_id=session_id, updated_at=utc_now())
                .execution_options(synchronize_session=False)
            )

    # -- runs --------------------------------------------------------------------------------

    async def start_run(
        self,
        *,
        kind: str,
        started_at: datetime,
        schedule_id: str | None = None,
        agent_id: str | None = None,
        scheduled_for: datetime | None = None,
        session_id: str | None = None,
        conversation_id: str | None = None,
        message_id: str | None = None,
        run_id: str | None = None,
    ) -> TaskRunRecord:
        row = TaskRunRow(
            id=run_id or f"run_{uuid.uuid4().hex}",
            schedule_id=schedule_id,
            task_id=schedule_id,
            kind=kind,
            agent_id=agent_id,
            session_id=session_id,
            conversation_id=conversation_id,
            message_id=message_id,
            scheduled_for=scheduled_for,
            started_at=started_at,
            finished_at=None,
            status="running",
            result=None,
            error=None,
            duration_ms=None,
            node_id=self.node_id,
        )
        async with self._transactions.write() as db:
            db.add(row)
        return _run(row)

    async def update_run(self, run_id: str, **changes: Any) -> TaskRunRecord:
        """Set fields of a run (``session_id``, ``conversation_id``, ``message_id``, ...)."""
        async with self._transactions.write() as db:
            row = await db.get(TaskRunRow, run_id)
            if row is None:
                raise ValidationError(f"unknown run {run_id!r}")
            for key, value in changes.items():
                setattr(row, key, value)
            return _run(row)

    async def finish_run(
        self,
        run_id: str,
        *,
        status: str,
        finished_at: datetime,
        result: str | None = None,
        error: str | None = None,
    ) -> TaskRunRecord:
        """Write a run's outcome once: a finished run is never rewritten (returns it as is)."""
        async with self._transactions.write() as db:
            row = await db.get(TaskRunRow, run_id)
            if row is None:
                raise ValidationError(f"unknown run {run_id!r}")
            if row.status != "running":
                return _run(row)
            row.status = status
            row.finished_at = finished_at
            row.result = None if result is None else result[:RESULT_CHARS]
            row.error = error
            row.duration_ms = max(0, int((finished_at - row.started_at).total_seconds() * 1000))
            return _run(row)

    async def get_run(self, run_id: str) -> TaskRunRecord | None:
        async with self._transactions.read() as db:
            row = await db.get(TaskRunRow, run_id)
            return None if row is None else _run(row)

    async def list_runs(
        self, *, schedule_id: str | None = None, limit: int = 50
    ) -> builtins.list[TaskRunRecord]:
        """Newest first."""
        query = select(TaskRunRow).order_by(TaskRunRow.started_at.desc(), TaskRunRow.id.desc())
        if schedule_id is not None:  # also the runs of a deleted schedule (``task_id``)
            query = query.where(TaskRunRow.task_id == schedule_id)
        async with self._transactions.read() as db:
            return [_run(row) for row in (await db.scalars(query.limit(limit))).all()]

    async def recent_outcomes(self, schedule_id: str, limit: int) -> builtins.list[str]:
        """The statuses of the schedule's newest finished runs (cancelled ones left out)."""
        query = (
            select(TaskRunRow.status)
            .where(
                TaskRunRow.schedule_id == schedule_id,
                TaskRunRow.status.not_in(("running", "cancelled")),
            )
            .order_by(TaskRunRow.started_at.desc(), TaskRunRow.id.desc())
            .limit(limit)
        )
        async with self._transactions.read() as db:
            return list((await db.scalars(query)).all())

    async def fail_running(
        self, now: datetime, error: str, *, node_id: str | None = None, all_nodes: bool = True
    ) -> int:
        """Boot: runs a crash left ``running`` become ``failed`` (returns how many).

        ``all_nodes`` (one process): every running run. Otherwise (cluster mode) only the runs
        of ``node_id``, this node's earlier life: other nodes' runs may be live."""
        where = [TaskRunRow.status == "running"]
        if not all_nodes:
            where.append(TaskRunRow.node_id == node_id)
        async with self._transactions.write() as db:
            result = await db.execute(
                update(TaskRunRow)
                .where(*where)
                .values(status="failed", finished_at=now, error=error)
                .execution_options(synchronize_session=False)
            )
            return int(result.rowcount)  # type: ignore[attr-defined]

    async def running_nodes(self) -> set[str | None]:
        """The nodes that have ``running`` task runs (None: runs with no node)."""
        async with self._transactions.read() as db:
            rows = await db.scalars(
                select(TaskRunRow.node_id).where(TaskRunRow.status == "running").distinct()
            )
            return set(rows.all())

    async def fail_running_of_gone_nodes(
        self, now: datetime, error: str, live_nodes: Collection[str]
    ) -> int:
        """Cluster sweep: running runs whose node is not in ``live_nodes`` (or has no node)
        become ``failed``; the caller owns the list of live nodes (returns how many)."""
        async with self._transactions.write() as db:
            result = await db.execute(
                update(TaskRunRow)
                .where(
                    TaskRunRow.status == "running",
                    or_(TaskRunRow.node_id.is_(None), TaskRunRow.node_id.not_in(list(live_nodes))),
                )
                .values(status="failed", finished_at=now, error=error)
                .execution_options(synchronize_session=False)
            )
            return int(result.rowcount)  # type: ignore[attr-defined]


def deliver_targets(items: Sequence[Mapping[str, Any]]) -> builtins.list[dict[str, str]]:
    """Normalise ``[{channel, chat}]`` (both non-empty strings); raise ``ValidationError``."""
    out: builtins.list[dict[str, str]] = []
    for item in items:
        channel, chat = item.get("channel"), item.get("chat")
        if not isinstance(channel, str) or not channel or not isinstance(chat, str) or not chat:
            raise ValidationError("deliver_to: each entry needs a non-empty 'channel' and 'chat'")
        out.append({"channel": channel, "chat": chat})
    return out
