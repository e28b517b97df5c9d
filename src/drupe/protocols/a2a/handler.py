"""``DrupeRequestHandler``: ``a2a-sdk``'s ``RequestHandler`` over Drupe's agent sessions.

Contract (``translate`` states the task model; every call goes through the
``Conversations`` port with the caller the route put in ``context.state["principal"]``, and
the agent id in ``context.state["agent_id"]``):

* ``SendMessage`` / ``SendStreamingMessage`` without ``taskId``: a new task, a turn in the
  session ``contextId`` (created on first use; a new session when absent). A context with a
  working task refuses (``reject``): a message for that task carries its ``taskId``.
* With the ``taskId`` of a working task: a steer (the session injects it into the running
  turn, or queues it for the turn after); the stream follows the task from its start. With the
  id of an ended task: ``UnsupportedOperationError`` (A2A tasks are immutable once ended).
* ``GetTask``, ``ListTasks``: from the stored rows (``ListTasks``: newest first, pages of at
  most 100, the page token is an offset).
* ``CancelTask``: Drupe's stop; returns after the partial answer was stored (``canceled``).
* ``SubscribeToTask``: the task, then its answer from its start (a compact replay of what was
  said so far) and live: the artifact the client rebuilds is the stored text exactly.
* Push notification configs (``push``): created with a message (``configuration``) or for a
  working task; the task's end is delivered signed, at least once. The extended card: not
  supported.
* Refusals raise the SDK's ``A2AError``s (JSON-RPC error codes); nothing is stored first.

The lookups (a task's rows, a context's session, a message's parts) are in ``lookup``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any, cast

from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.tasks.inmemory_push_notification_config_store import (
    InMemoryPushNotificationConfigStore,
)
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from drupe.admission.base import Submit
from drupe.errors import AdmissionError, DrupeError, UnknownConversationError, ValidationError
from drupe.ids import SESSION_PREFIX, session_conversation_id
from drupe.protocols.a2a.lookup import (
    MAX_ID,
    Turn,
    caller_of,
    check_push,
    find_session,
    find_turn,
    list_tasks,
    message_parts,
)
from drupe.protocols.a2a.push import PushSender
from drupe.protocols.a2a.translate import TaskStream, task_of, user_message
from drupe.protocols.follower import AnswerFollower
from drupe.streaming.listeners.base import TerminalResult

if TYPE_CHECKING:
    from drupe.app import Runtime

__all__ = ["DrupeRequestHandler"]

_IDLE = 15.0


class DrupeRequestHandler(RequestHandler):
    def __init__(self, runtime: Runtime, *, push: PushSender | None = None) -> None:
        self.runtime = runtime
        self.push_store = InMemoryPushNotificationConfigStore()
        self.push = push or PushSender()
        self._watched: set[str] = set()

    # --- lookups ----------------------------------------------------------------------------

    async def _turn(self, context: ServerCallContext, task_id: str) -> Turn:
        return await find_turn(self.runtime, context, task_id)

    # --- send ------------------------------------------------------------------------------

    async def _start(
        self,
        params: SendMessageRequest,
        context: ServerCallContext,
        follower: AnswerFollower | None,
    ) -> tuple[Turn | None, Any]:
        """Admit the message; returns (the steered task, None) or (None, the admission)."""
        message = params.message
        parts = message_parts(self.runtime, message)
        if params.configuration.HasField("task_push_notification_config"):
            check_push(params.configuration.task_push_notification_config)
        if message.task_id:
            turn = await self._turn(context, message.task_id)
            if not turn.working:
                raise UnsupportedOperationError(
                    message=f"task {message.task_id!r} has ended; send a new message without "
                    "taskId to start another"
                )
            submit = Submit(conversation_id=turn.conversation_id, parts=parts, strategy="enqueue")
            await self._submit(context, submit, None)
            return turn, None
        if message.context_id and len(message.context_id) > MAX_ID:
            raise InvalidParamsError(message=f"contextId has at most {MAX_ID} characters")
        session_id, created = await find_session(self.runtime, context, message.context_id)
        submit = Submit(
            conversation_id=session_conversation_id(session_id), parts=parts, strategy="reject"
        )
        try:
            admitted = await self._submit(context, submit, follower)
        except BaseException:
            if created:  # refused: the session made for the message goes too
                await self.runtime.db.agents.delete_session(session_id)
            raise
        return None, admitted

    async def _submit(
        self, context: ServerCallContext, submit: Submit, follower: AnswerFollower | None
    ) -> Any:
        try:
            return await self.runtime.conversations.submit(
                caller_of(context), submit, listener=follower
            )
        except AdmissionError as err:
            if err.reason == "busy":
                raise UnsupportedOperationError(
                    message="the context has a working task: send the message with its taskId "
                    "(a steer), or cancel it first"
                ) from None
            raise InvalidParamsError(message=str(err)) from None
        except UnknownConversationError as err:
            raise TaskNotFoundError(message=str(err)) from None
        except (ValidationError, DrupeError) as err:
            raise InvalidParamsError(message=str(err)) from None

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        follower = AnswerFollower(f"a2a:{uuid.uuid4().hex}")
        steered, admitted = await self._start(params, context, follower)
        if steered is not None:
            async for event in self._follow_live(context, steered):
                yield event
            return
        try:
            result = admitted.result
            session_id = result.conversation_id[len(SESSION_PREFIX) :]
            task_id = result.placeholder_ids[0]
            await self._push_with(params, context, task_id)
            user = user_message(
                result.user_message_id or "",
                message_parts(self.runtime, params.message),
                task_id=task_id,
                context_id=session_id,
            )
            yield task_of(
                task_id=task_id,
                context_id=session_id,
                row_status="pending",
                parts=[],
                history=[user],
                live=True,
            )
            async for event in self._pump(follower, TaskStream(task_id, session_id)):
                yield event
        finally:
            follower.closed = True
            admitted.close()

    async def _pump(self, follower: AnswerFollower, stream: TaskStream) -> AsyncGenerator[Event]:
        while True:
            items = await follower.take(_IDLE)
            if items is None:
                continue
            if follower.overflowed:
                for event in stream.finished("error", error="the client read too slowly"):
                    yield event
                return
            for item in items:
                if isinstance(item, TerminalResult):
                    error = (item.error or {}).get("message") if item.error else None
                    for end in stream.finished(item.status, error=error):
                        yield end
                    return
                for update in stream.feed(item.chunk):
                    yield update

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        immediate = params.configuration.return_immediately
        follower = None if immediate else AnswerFollower(f"a2a:{uuid.uuid4().hex}")
        steered, admitted = await self._start(params, context, follower)
        if steered is not None:
            return (await self._turn(context, steered.row.id)).task()
        try:
            task_id = admitted.result.placeholder_ids[0]
            await self._push_with(params, context, task_id)
            if follower is not None:
                async for _ in self._pump(follower, TaskStream(task_id, "")):
                    pass
        finally:
            if follower is not None:
                follower.closed = True
            admitted.close()
        length = params.configuration.history_length or None
        return (await self._turn(context, task_id)).task(history_length=length)

    # --- tasks -----------------------------------------------------------------------------

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        turn = await self._turn(context, params.id)
        length = params.history_length if params.HasField("history_length") else None
        return turn.task(history_length=length)

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        return await list_tasks(self.runtime, params, context)

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        turn = await self._turn(context, params.id)
        if not turn.working:
            raise TaskNotCancelableError(message=f"task {params.id!r} has already ended")
        await self.runtime.conversations.stop(caller_of(context), turn.conversation_id)
        after = await self._turn(context, params.id)
        if after.task().status.state != TaskState.TASK_STATE_CANCELED:
            raise TaskNotCancelableError(message=f"task {params.id!r} ended before the stop")
        return after.task()

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        turn = await self._turn(context, params.id)
        if not turn.working:
            raise UnsupportedOperationError(message=f"task {params.id!r} has ended: GetTask it")
        async for event in self._follow_live(context, turn):
            yield event

    async def _follow_live(self, context: ServerCallContext, turn: Turn) -> AsyncGenerator[Event]:
        """The task (no artifact), then its answer from its start and live."""
        follower = AnswerFollower(f"a2a-sub:{uuid.uuid4().hex}")
        subscription = await self.runtime.conversations.resume(
            caller_of(context), turn.conversation_id, cast(Any, follower), None
        )
        try:
            if subscription is None:
                yield (await self._turn(context, turn.row.id)).task()
                return
            snapshot = turn.task(artifacts=False)
            snapshot.status.state = TaskState.TASK_STATE_WORKING
            yield snapshot
            async for event in self._pump(follower, TaskStream(turn.row.id, turn.session_id)):
                yield event
        finally:
            follower.closed = True
            if subscription is not None:
                subscription.close()

    # --- push notifications -------------------------------------------------------------

    async def _push_with(
        self, params: SendMessageRequest, context: ServerCallContext, task_id: str
    ) -> None:
        if params.configuration.HasField("task_push_notification_config"):
            config = TaskPushNotificationConfig()
            config.CopyFrom(params.configuration.task_push_notification_config)
            config.task_id = task_id
            await self.push_store.set_info(task_id, config, context)
            self._watch(context, task_id)

    def _watch(self, context: ServerCallContext, task_id: str) -> None:
        """Deliver the task's end to its configs (one watcher per task, owned by the manager's
        task group)."""
        if task_id in self._watched:
            return
        self._watched.add(task_id)
        self.runtime.manager.task_group.start_soon(self._deliver_end, context, task_id)

    async def _deliver_end(self, context: ServerCallContext, task_id: str) -> None:
        try:
            turn = await self._turn(context, task_id)
            if turn.working:
                follower = AnswerFollower(f"a2a-push:{uuid.uuid4().hex}")
                subscription = await self.runtime.conversations.resume(
                    caller_of(context), turn.conversation_id, cast(Any, follower), None
                )
                try:
                    while subscription is not None:
                        items = await follower.take(_IDLE)
                        if items and any(isinstance(i, TerminalResult) for i in items):
                            break
                finally:
                    follower.closed = True
                    if subscription is not None:
                        subscription.close()
            task = (await self._turn(context, task_id)).task()
            for config in await self.push_store.get_info_for_dispatch(task_id):
                await self.push.deliver(config, task)
        finally:
            self._watched.discard(task_id)

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        turn = await self._turn(context, params.task_id)
        check_push(params)
        stored = await self.push_store.set_info(turn.row.id, params, context)
        if turn.working:
            self._watch(context, turn.row.id)
        return stored

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        await self._turn(context, params.task_id)
        for config in await self.push_store.get_info(params.task_id, context):
            if config.id == params.id:
                return config
        raise TaskNotFoundError(message=f"no push notification config {params.id!r}")

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        await self._turn(context, params.task_id)
        configs = await self.push_store.get_info(params.task_id, context)
        return ListTaskPushNotificationConfigsResponse(configs=configs)

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        await self._turn(context, params.task_id)
        await self.push_store.delete_info(params.task_id, context, params.id)

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError()
