"""``remote_agent_tool``: a remote A2A agent as a tool (``a2a-sdk``'s client).

Contract:

* Input ``{"message": text, "contextId"?: text}``; the call sends the message to the remote
  agent over its card's transport, streaming, and returns ``{"taskId", "contextId", "state",
  "text"}`` (``text``: the task's artifacts, merged as the SDK merges updates). A follow-up call
  with the returned ``contextId`` continues the remote conversation.
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

__all__ = ["remote_agent_tool"]

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
        from a2a.server.tasks.task_manager import append_artifact_to_task
        from a2a.types.a2a_pb2 import (
            CancelTaskRequest,
            Message,
            Part,
            Role,
            SendMessageRequest,
            Task,
            TaskState,
        )

        message = arguments.get("message")
        if not isinstance(message, str) or not message.strip():
            raise ToolError("message: the text to send to the remote agent")
        context_id = arguments.get("contextId") or ""
        if not isinstance(context_id, str):
            raise ToolError("contextId: text")
        name = self.config.tool_name
        task: Task | None = None
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
            try:
                with anyio.fail_after(self.config.timeout_s):
                    async for event in client.send_message(request):
                        if event.HasField("task"):
                            task = Task()
                            task.CopyFrom(event.task)
                        elif task is None:
                            continue
                        elif event.HasField("artifact_update"):
                            append_artifact_to_task(task, event.artifact_update)
                        elif event.HasField("status_update"):
                            task.status.CopyFrom(event.status_update.status)
            except BaseException as err:
                if task is not None and not isinstance(err, ToolError):
                    with anyio.move_on_after(_CANCEL_BOUND, shield=True):
                        with contextlib.suppress(Exception):  # it may have ended already
                            await client.cancel_task(CancelTaskRequest(id=task.id))
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
        if task is None:
            raise ToolError(f"{name}: the remote agent answered no task")
        text = "".join(p.text for a in task.artifacts for p in a.parts)
        state = TaskState.Name(task.status.state).removeprefix("TASK_STATE_").lower()
        if task.status.state in (TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_REJECTED):
            why = "".join(p.text for p in task.status.message.parts) or state
            raise ToolError(f"{name}: the remote task {state}: {why}")
        return {"taskId": task.id, "contextId": task.context_id, "state": state, "text": text}


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
