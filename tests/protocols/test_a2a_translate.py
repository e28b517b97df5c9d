"""``drupe.protocols.a2a.translate``: turns -> A2A tasks and updates, value by value."""

from __future__ import annotations

from a2a.server.tasks.task_manager import append_artifact_to_task
from a2a.types.a2a_pb2 import Role, Task, TaskState

from drupe.protocols.a2a.translate import (
    ANSWER_ARTIFACT,
    TaskStream,
    answer_text,
    task_of,
    task_state,
    user_message,
)

APPROVAL = {"type": "tool-rm", "toolCallId": "c", "state": "approval-requested"}


def test_states_of_rows() -> None:
    assert task_state("pending", [], live=False) == TaskState.TASK_STATE_WORKING
    assert task_state("success", [], live=True) == TaskState.TASK_STATE_WORKING
    assert task_state("success", [], live=False) == TaskState.TASK_STATE_COMPLETED
    assert task_state("success", [APPROVAL], live=False) == TaskState.TASK_STATE_INPUT_REQUIRED
    assert task_state("paused", [], live=False) == TaskState.TASK_STATE_CANCELED
    assert task_state("error", [], live=False) == TaskState.TASK_STATE_FAILED


def test_the_task_of_stored_rows_keeps_the_partial_answer() -> None:
    parts = [
        {"type": "step-start"},
        {"type": "text", "text": "Half an "},
        {"type": "tool-x", "toolCallId": "c", "state": "output-available"},
        {"type": "text", "text": "answer"},
    ]
    user = user_message("u1", [{"type": "text", "text": "hi"}], task_id="a1", context_id="s1")
    task = task_of(
        task_id="a1", context_id="s1", row_status="paused", parts=parts, history=[user], live=False
    )
    assert (task.id, task.context_id) == ("a1", "s1")
    assert task.status.state == TaskState.TASK_STATE_CANCELED
    assert [a.artifact_id for a in task.artifacts] == [ANSWER_ARTIFACT]
    assert [p.text for p in task.artifacts[0].parts] == ["Half an ", "answer"]
    assert task.history[0].role == Role.ROLE_USER and task.history[0].parts[0].text == "hi"
    assert answer_text(parts) == ["Half an ", "answer"]
    bare = task_of(
        task_id="a1", context_id="s1", row_status="pending", parts=[], history=[], live=True
    )
    assert list(bare.artifacts) == []


def test_streamed_deltas_rebuild_the_text_with_the_sdk_merge() -> None:
    stream = TaskStream("a1", "s1")
    task = Task(id="a1", context_id="s1")
    deltas = ["Hello ", "", "wide ", "world"]
    updates = []
    for chunk in [
        {"type": "start"},
        *({"type": "text-delta", "id": "p", "delta": d} for d in deltas),
    ]:
        updates += stream.feed(chunk)
    assert [u.append for u in updates] == [False, True, True]  # the empty delta is skipped
    for update in updates:
        append_artifact_to_task(task, update)
    assert "".join(p.text for p in task.artifacts[0].parts) == "Hello wide world"
    (end,) = stream.finished("error", error="provider 500")
    assert end.status.state == TaskState.TASK_STATE_FAILED
    assert end.status.message.parts[0].text == "provider 500"
    assert stream.finished("success") == []
    assert stream.feed({"type": "text-delta", "id": "p", "delta": "late"}) == []


def test_a_failed_task_says_why() -> None:
    parts = [
        {"type": "text", "text": "half"},
        {"type": "data-error", "data": {"name": "ServerRestart", "message": "the server stopped"}},
    ]
    task = task_of(
        task_id="a", context_id="s", row_status="error", parts=parts, history=[], live=False
    )
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert task.status.message.parts[0].text == "ServerRestart: the server stopped"
    assert [p.text for p in task.artifacts[0].parts] == ["half"]
