"""Drupe turns -> A2A tasks (pure: no I/O; protobuf values of ``a2a.types``).

Contract:

* A task is one Drupe turn of an agent session: its id is the turn's assistant row id, its
  ``contextId`` the session id, its history the user row(s) it answers, its one artifact
  (``artifactId = "answer"``) the answer's text parts.
* States: a live or ``pending`` row is ``working``; ``success`` is ``completed`` (or
  ``input-required`` while a tool approval waits); ``paused`` is ``canceled``; ``error`` is
  ``failed`` (its status message: the answer's ``data-error``, e.g. a server restart). The
  partial answer of a canceled or failed task stays its artifact.
* ``TaskStream`` turns the chunks of the answer it follows into ``TaskArtifactUpdateEvent``s:
  the first text delta creates the artifact (``append = false``), every later one appends a
  text part, so a client merging them (``append_artifact_to_task``) rebuilds the stored text
  exactly; the terminal becomes one ``TaskStatusUpdateEvent`` in the final state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from a2a.types.a2a_pb2 import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.timestamp_pb2 import Timestamp

__all__ = [
    "ANSWER_ARTIFACT",
    "TaskStream",
    "answer_text",
    "task_of",
    "task_state",
    "user_message",
]

ANSWER_ARTIFACT = "answer"

_TERMINAL_STATES = {
    "success": TaskState.TASK_STATE_COMPLETED,
    "paused": TaskState.TASK_STATE_CANCELED,
    "error": TaskState.TASK_STATE_FAILED,
}


def _timestamp(when: datetime | None) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime((when or datetime.now(UTC)).astimezone(UTC))
    return stamp


def _waits_for_approval(parts: Sequence[Mapping[str, Any]]) -> bool:
    return any(p.get("state") == "approval-requested" for p in parts)


def task_state(row_status: str, parts: Sequence[Mapping[str, Any]], *, live: bool) -> int:
    """The A2A state of a turn whose assistant row has ``row_status`` and ``parts``."""
    if live or row_status == "pending":
        return TaskState.TASK_STATE_WORKING
    if row_status == "success" and _waits_for_approval(parts):
        return TaskState.TASK_STATE_INPUT_REQUIRED
    return _TERMINAL_STATES.get(row_status, TaskState.TASK_STATE_FAILED)


def _error_text(parts: Sequence[Mapping[str, Any]]) -> str | None:
    """The message of the answer's ``data-error`` part (a failure, a server restart)."""
    for part in reversed(parts):
        data = part.get("data")
        if part.get("type") == "data-error" and isinstance(data, Mapping):
            name, message = data.get("name"), data.get("message")
            return f"{name}: {message}" if name else str(message or "failed")
    return None


def answer_text(parts: Sequence[Mapping[str, Any]]) -> list[str]:
    """The answer's text parts, in order (the artifact's parts)."""
    return [str(p.get("text", "")) for p in parts if p.get("type") == "text" and p.get("text")]


def user_message(
    message_id: str, parts: Sequence[Mapping[str, Any]], *, task_id: str, context_id: str
) -> Message:
    texts = [str(p["text"]) for p in parts if p.get("type") == "text" and p.get("text")]
    return Message(
        message_id=message_id,
        context_id=context_id,
        task_id=task_id,
        role=Role.ROLE_USER,
        parts=[Part(text=t) for t in texts],
    )


def task_of(
    *,
    task_id: str,
    context_id: str,
    row_status: str,
    parts: Sequence[Mapping[str, Any]],
    history: Sequence[Message],
    live: bool,
    updated_at: datetime | None = None,
    with_artifacts: bool = True,
) -> Task:
    """The task of a turn from its stored rows (and whether it is live)."""
    task = Task(
        id=task_id,
        context_id=context_id,
        status=TaskStatus(
            state=task_state(row_status, parts, live=live),  # type: ignore[arg-type]
            timestamp=_timestamp(updated_at),
        ),
        history=list(history),
    )
    error = _error_text(parts) if task.status.state == TaskState.TASK_STATE_FAILED else None
    if error:
        task.status.message.CopyFrom(
            Message(
                message_id=f"{task_id}:error",
                context_id=context_id,
                task_id=task_id,
                role=Role.ROLE_AGENT,
                parts=[Part(text=error)],
            )
        )
    texts = answer_text(parts)
    if with_artifacts and texts:
        task.artifacts.append(
            Artifact(
                artifact_id=ANSWER_ARTIFACT, name="answer", parts=[Part(text=t) for t in texts]
            )
        )
    return task


@dataclass(slots=True)
class TaskStream:
    """The update events of one task's live answer."""

    task_id: str
    context_id: str
    _created: bool = False
    _ended: bool = False

    def feed(self, chunk: Mapping[str, Any]) -> list[TaskArtifactUpdateEvent]:
        if self._ended or chunk.get("type") != "text-delta" or not chunk.get("delta"):
            return []
        append, self._created = self._created, True
        return [
            TaskArtifactUpdateEvent(
                task_id=self.task_id,
                context_id=self.context_id,
                artifact=Artifact(artifact_id=ANSWER_ARTIFACT, parts=[Part(text=chunk["delta"])]),
                append=append,
            )
        ]

    def finished(
        self, status: str, *, error: str | None = None, when: datetime | None = None
    ) -> list[TaskStatusUpdateEvent]:
        if self._ended:
            return []
        self._ended = True
        state = _TERMINAL_STATES.get(status, TaskState.TASK_STATE_FAILED)
        message = None
        if error:
            message = Message(
                message_id=f"{self.task_id}:error",
                context_id=self.context_id,
                task_id=self.task_id,
                role=Role.ROLE_AGENT,
                parts=[Part(text=error)],
            )
        status_value = TaskStatus(state=state, timestamp=_timestamp(when))
        if message is not None:
            status_value.message.CopyFrom(message)
        return [
            TaskStatusUpdateEvent(
                task_id=self.task_id, context_id=self.context_id, status=status_value
            )
        ]
