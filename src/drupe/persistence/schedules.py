"""``ScheduleStore``: scheduled agent tasks (``schedules``) and their run history (``task_runs``).

The only code that issues SQL against those two tables. Times that decide something (a claim,
a run's start and end) are passed in by the caller, who owns the clock; only ``created_at`` and
``updated_at`` come from the wall clock.

Exactly-once firing: ``claim`` is one conditional ``UPDATE`` on the schedule row (``WHERE id = ?
AND enabled AND next_run_at = <the occurrence the caller saw>``). Of several processes that saw
the same occurrence, exactly one updates a row; the others get ``False`` and fire nothing. The
unique index on ``(schedule_id, scheduled_for)`` of ``task_runs`` backs this up: an occurrence can
have only one run row.

Every call is one transaction. Unknown ids raise ``ValidationError``. The records it returns
are in ``drupe.persistence.schedule_records``.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Collection
from datetime import datetime
from typing import Any, Final

from sqlalchemy import delete, or_, select, update

from drupe.errors import ValidationError
from drupe.persistence.clock import utc_now
from drupe.persistence.schedule_records import (
    ScheduleRecord,
    TaskRunRecord,
    run_record,
    schedule_record,
)
from drupe.persistence.tables import ScheduleRow, TaskRunRow
from drupe.persistence.transaction import Transactions

__all__ = ["RESULT_CHARS", "ScheduleStore"]

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
        return schedule_record(row)

    async def get(self, schedule_id: str) -> ScheduleRecord | None:
        async with self._transactions.read() as db:
            row = await db.get(ScheduleRow, schedule_id)
            return None if row is None else schedule_record(row)

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
            return [schedule_record(row) for row in (await db.scalars(query)).all()]

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
            return schedule_record(row)

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
            return [schedule_record(row) for row in (await db.scalars(query)).all()]

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
            if schedule_id is not None:  # a manual run is a run too: the task's "last run"
                await db.execute(
                    update(ScheduleRow)
                    .where(ScheduleRow.id == schedule_id)
                    .values(last_run_at=started_at)
                    .execution_options(synchronize_session=False)
                )
        return run_record(row)

    async def update_run(self, run_id: str, **changes: Any) -> TaskRunRecord:
        """Set fields of a run (``session_id``, ``conversation_id``, ``message_id``, ...)."""
        async with self._transactions.write() as db:
            row = await db.get(TaskRunRow, run_id)
            if row is None:
                raise ValidationError(f"unknown run {run_id!r}")
            for key, value in changes.items():
                setattr(row, key, value)
            return run_record(row)

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
                return run_record(row)
            row.status = status
            row.finished_at = finished_at
            row.result = None if result is None else result[:RESULT_CHARS]
            row.error = error
            row.duration_ms = max(0, int((finished_at - row.started_at).total_seconds() * 1000))
            return run_record(row)

    async def get_run(self, run_id: str) -> TaskRunRecord | None:
        async with self._transactions.read() as db:
            row = await db.get(TaskRunRow, run_id)
            return None if row is None else run_record(row)

    async def list_runs(
        self, *, schedule_id: str | None = None, limit: int = 50
    ) -> builtins.list[TaskRunRecord]:
        """Newest first."""
        query = select(TaskRunRow).order_by(TaskRunRow.started_at.desc(), TaskRunRow.id.desc())
        if schedule_id is not None:  # also the runs of a deleted schedule (``task_id``)
            query = query.where(TaskRunRow.task_id == schedule_id)
        async with self._transactions.read() as db:
            return [run_record(row) for row in (await db.scalars(query.limit(limit))).all()]

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
