"""A background chat turn: a turn no connection owns, followed by a run row to its end.

Contract: ``admit_chat_run`` refuses a live conversation (``AdmissionError("busy")``) before
anything is written; otherwise it opens a ``chat`` run row, submits the turn through the
``Conversations`` port as ``caller`` with only a ``TaskSentinel`` listener (so the turn runs to
its end whatever any client does), registers the run's control in ``controls`` and returns the
row with the answer's message id. A refused submit finishes the row ``failed`` ("not admitted")
and re-raises. ``follow_chat_run`` waits for the sentinel to settle, records how the turn ended
on the row, and then drops the control.
"""

from __future__ import annotations

import anyio

from drupe.admission.base import Regenerate, Submit
from drupe.admission.principal import Principal
from drupe.errors import AdmissionError
from drupe.persistence.schedule_records import TaskRunRecord
from drupe.tasks.run import RunControl, TaskDeps
from drupe.tasks.sentinel import TaskSentinel

__all__ = ["admit_chat_run", "follow_chat_run"]


async def admit_chat_run(
    deps: TaskDeps,
    controls: dict[str, RunControl],
    request: Submit | Regenerate,
    caller: Principal,
) -> tuple[TaskRunRecord, RunControl]:
    store = deps.db.schedules
    conversation_id = request.conversation_id
    if deps.conversations.is_live(conversation_id):
        raise AdmissionError(
            "busy",
            f"conversation {conversation_id!r} is answering; a background submit needs an "
            "idle conversation",
        )
    run = await store.start_run(
        kind="chat", started_at=deps.clock.now(), conversation_id=conversation_id
    )
    sentinel = TaskSentinel(f"agent-task:{run.id}")
    control = RunControl(conversation_id=conversation_id, sentinel=sentinel, caller=caller)
    try:
        admission = await deps.conversations.submit(caller, request, subscribers=[sentinel])
    except BaseException:
        with anyio.CancelScope(shield=True):
            await store.finish_run(
                run.id, status="failed", finished_at=deps.clock.now(), error="not admitted"
            )
        raise
    controls[run.id] = control
    control.started.set()
    record = await store.update_run(
        run.id,
        message_id=admission.result.placeholder_ids[0]
        if admission.result.placeholder_ids
        else None,
    )
    return record, control


async def follow_chat_run(
    deps: TaskDeps, controls: dict[str, RunControl], run_id: str, control: RunControl
) -> None:
    assert control.sentinel is not None
    try:
        await control.sentinel.settled.wait()
        outcome = control.sentinel.outcome
        assert outcome is not None
        await deps.db.schedules.finish_run(
            run_id,
            status=outcome.status,
            finished_at=deps.clock.now(),
            result=outcome.text or "Completed",
            error=outcome.error,
        )
    finally:
        controls.pop(run_id, None)
        control.finished.set()
