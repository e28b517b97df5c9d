"""``remote_agent_tool``: a remote A2A agent as a tool (``a2a-sdk``'s client).

Contract:

* Input ``{"message": text, "contextId"?: text}``; the call sends the message to the remote
  agent over its card's transport, streaming, and returns ``{"taskId", "contextId", "state",
  "text", "status"?}`` (``text``: the task's artifacts, merged as the SDK merges updates;
  ``status``: the text of the task's latest status message, when it has one). A follow-up call
  with the returned ``contextId`` continues the remote conversation. A remote that answers with
  a message instead of a task returns that message's text (``taskId`` empty, ``completed``).
* Progress: while the remote task runs (``submitted`` or ``working``), every status or artifact
  update it streams is reported to ``ToolContext.progress`` as a snapshot of the same shape,
  its ``text`` the last ``PROGRESS_TEXT_CHARS`` characters (``"truncated": true`` when cut),
  coalesced to at most one per ``progress_interval_s`` (``drupe.tools.progress``). The final
  output is never cut.
* A task that ends ``failed`` or ``rejected`` raises ``ToolError`` (the model sees the error);
  ``input-required`` / ``auth-required`` return what was said so far with that state.
* Cancellation (Drupe's stop of the calling turn) cancels the remote task (``CancelTask``,
  bounded and shielded), then propagates.
* The bearer token comes from ``token_env`` at call time; the card is fetched once per tool
  and kept. The SDK is imported on the first call.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Any

import anyio

from drupe.errors import ToolError
from drupe.tools.a2a.config import RemoteAgentConfig
from drupe.tools.base import ToolContext, ToolEntry
from drupe.tools.progress import coalesced_progress

__all__ = ["PROGRESS_TEXT_CHARS", "RemoteTask", "remote_agent_tool"]

PROGRESS_TEXT_CHARS = 2000
"""The most of the remote's text one progress snapshot carries (its end)."""
_CANCEL_BOUND = 10.0
_SCHEMA = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "What to ask the remote agent."},
        "contextId": {
            "type": "string",
            "description": "A previous call's contextId, to continue that conversation.",
        },
    },
    "required": ["message"],
}


class _Remote:
    def __init__(self, config: RemoteAgentConfig) -> None:
        self.config = config
        self._card: Any = None

    def _headers(self) -> dict[str, str]:
        if self.config.token_env is None:
            return {}
        token = os.environ.get(self.config.token_env, "")
        if not token:
            raise ToolError(f"{self.config.tool_name}: ${self.config.token_env} is not set")
        return {"authorization": f"Bearer {token}"}

    async def call(self, arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
        import httpx
        from a2a.client import A2ACardResolver, A2AClientError, ClientConfig, create_client
        from a2a.types.a2a_pb2 import CancelTaskRequest, Message, Part, Role, SendMessageRequest

        message = arguments.get("message")
        if not isinstance(message, str) or not message.strip():
            raise ToolError("message: the text to send to the remote agent")
        context_id = arguments.get("contextId") or ""
        if not isinstance(context_id, str):
            raise ToolError("contextId: text")
        name = self.config.tool_name
        follower = RemoteTask()
        async with httpx.AsyncClient(headers=self._headers(), timeout=30) as http:
            try:
                if self._card is None:
                    resolver = A2ACardResolver(http, self.config.base_url)
                    self._card = await resolver.get_agent_card()
                client = await create_client(
                    self._card, client_config=ClientConfig(httpx_client=http, streaming=True)
                )
            except (A2AClientError, httpx.HTTPError) as err:
                raise ToolError(f"{name}: cannot reach the remote agent: {err}") from err
            request = SendMessageRequest(
                message=Message(
                    message_id=f"{context.tool_call_id}",
                    role=Role.ROLE_USER,
                    parts=[Part(text=message)],
                    context_id=context_id,
                )
            )
            interval = self.config.progress_interval_s
            try:
                with anyio.fail_after(self.config.timeout_s):
                    async with coalesced_progress(context.progress, interval) as update:
                        async for event in client.send_message(request):
                            if follower.take(event) and follower.running():
                                update(follower.output(PROGRESS_TEXT_CHARS))
            except BaseException as err:
                if follower.task is not None and not isinstance(err, ToolError):
                    with anyio.move_on_after(_CANCEL_BOUND, shield=True):
                        with contextlib.suppress(Exception):  # it may have ended already
                            await client.cancel_task(CancelTaskRequest(id=follower.task.id))
                if isinstance(err, A2AClientError | httpx.HTTPError):
                    raise ToolError(f"{name}: the remote agent failed: {err}") from err
                if isinstance(err, TimeoutError):
                    raise ToolError(
                        f"{name}: no answer within {self.config.timeout_s:g} s (canceled)"
                    ) from err
                raise
            finally:
                with anyio.CancelScope(shield=True):
                    await client.close()
        return follower.result(name)


class RemoteTask:
    """The remote task as its stream tells it (the SDK's merge of artifact updates)."""

    def __init__(self) -> None:
        self.task: Any = None
        self.answer: Any = None  # a direct Message instead of a task

    def take(self, event: Any) -> bool:
        """Fold one ``StreamResponse``; whether the task changed (worth a progress report)."""
        from a2a.server.tasks.task_manager import append_artifact_to_task
        from a2a.types.a2a_pb2 import Task

        if event.HasField("task"):
            self.task = Task()
            self.task.CopyFrom(event.task)
            return True
        if event.HasField("message"):
            self.answer = event.message
            return False
        update = (
            event.artifact_update
            if event.HasField("artifact_update")
            else event.status_update
            if event.HasField("status_update")
            else None
        )
        if update is None:
            return False
        if self.task is None:  # an update before the task: the update names it
            self.task = Task(id=update.task_id, context_id=update.context_id)
        if event.HasField("artifact_update"):
            append_artifact_to_task(self.task, update)
        else:
            self.task.status.CopyFrom(update.status)
        return True

    def running(self) -> bool:
        """Whether the task is still under way (an end is the call's output, not progress)."""
        from a2a.types.a2a_pb2 import TaskState

        return self.task is not None and self.task.status.state in (
            TaskState.TASK_STATE_UNSPECIFIED,
            TaskState.TASK_STATE_SUBMITTED,
            TaskState.TASK_STATE_WORKING,
        )

    def output(self, text_chars: int | None = None) -> dict[str, Any]:
        """The task as the tool reports it; ``text`` cut to its last ``text_chars``."""
        from a2a.types.a2a_pb2 import TaskState

        task = self.task
        text = "".join(p.text for a in task.artifacts for p in a.parts)
        state = TaskState.Name(task.status.state).removeprefix("TASK_STATE_").lower()
        out: dict[str, Any] = {"taskId": task.id, "contextId": task.context_id, "state": state}
        if text_chars is not None and len(text) > text_chars:
            out |= {"text": text[-text_chars:], "truncated": True}
        else:
            out["text"] = text
        status = "".join(p.text for p in task.status.message.parts)
        if status:
            out["status"] = status
        return out

    def result(self, name: str) -> dict[str, Any]:
        """The call's output once the stream ended; a failed or rejected task raises."""
        from a2a.types.a2a_pb2 import TaskState

        if self.task is None:
            if self.answer is None:
                raise ToolError(f"{name}: the remote agent answered no task")
            text = "".join(p.text for p in self.answer.parts)
            context_id = self.answer.context_id
            return {"taskId": "", "contextId": context_id, "state": "completed", "text": text}
        out = self.output()
        if self.task.status.state in (TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_REJECTED):
            why = out.get("status") or out["state"]
            raise ToolError(f"{name}: the remote task {out['state']}: {why}")
        return out


def remote_agent_tool(config: RemoteAgentConfig) -> ToolEntry:
    remote = _Remote(config)
    description = config.description or (
        f"Ask the remote A2A agent {config.id!r} (its card: {config.card_url}). "
        "Returns its answer text; pass contextId to continue the same conversation."
    )
    return ToolEntry(
        name=config.tool_name,
        description=description,
        input_schema=_SCHEMA,
        execute=remote.call,
        namespace="a2a",
        defer="never",
    )
