"""The A2A handler's lookups: a task's stored rows, a context's session, a message's parts.

Contract: every lookup is scoped to the caller (``context.state["principal"]``, the local admin
when absent) and the agent of the route (``context.state["agent_id"]``). A task is an assistant
row of an agent session of that agent; anything else (another agent's, a plain conversation's,
an id over ``MAX_ID`` characters) is ``TaskNotFoundError``. A context id names a session of
that agent (created on first use); another agent's is ``InvalidParamsError``. A message takes
text parts only, at most ``limits.max_message_chars`` characters in all. ``list_tasks``
reads the agent's tasks newest first, in pages of at most ``MAX_PAGE`` (the token an offset).
Nothing here writes except the session a new context creates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import (
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError

from drupe.admission.principal import LOCAL_ADMIN, Principal
from drupe.errors import UnknownConversationError
from drupe.ids import SESSION_PREFIX, session_conversation_id
from drupe.protocols.a2a.translate import task_of, user_message

if TYPE_CHECKING:
    from drupe.app import Runtime
    from drupe.persistence.records import MessageRecord

__all__ = [
    "MAX_ID",
    "Turn",
    "agent_id_of",
    "caller_of",
    "check_push",
    "find_session",
    "find_turn",
    "list_tasks",
    "message_parts",
    "users_of",
]

MAX_ID = 256
MAX_PAGE = 100
DEFAULT_PAGE = 50


def caller_of(context: ServerCallContext) -> Principal:
    principal = context.state.get("principal")
    return principal if isinstance(principal, Principal) else LOCAL_ADMIN


def agent_id_of(context: ServerCallContext) -> str:
    return str(context.state["agent_id"])


class Turn:
    """A task's stored rows: the assistant row and the user rows it answers."""

    def __init__(self, row: MessageRecord, users: Sequence[MessageRecord], session_id: str):
        self.row = row
        self.users = list(users)
        self.session_id = session_id
        self.conversation_id = row.conversation_id

    @property
    def working(self) -> bool:
        return self.row.status == "pending"

    def task(self, *, history_length: int | None = None, artifacts: bool = True) -> Task:
        history = [
            user_message(u.id, u.parts, task_id=self.row.id, context_id=self.session_id)
            for u in self.users
        ]
        if history_length is not None:
            history = history[-history_length:] if history_length > 0 else []
        return task_of(
            task_id=self.row.id,
            context_id=self.session_id,
            row_status=self.row.status,
            parts=self.row.parts,
            history=history,
            live=False,
            updated_at=self.row.updated_at,
            with_artifacts=artifacts,
        )


def check_push(config: TaskPushNotificationConfig) -> None:
    if not config.url.startswith(("https://", "http://")):
        raise InvalidParamsError(message="push notification config: url must be http(s)")
    if not config.token:
        raise InvalidParamsError(
            message="push notification config: a token is required (Drupe signs every "
            "notification with it: X-Drupe-Signature)"
        )


async def find_turn(runtime: Runtime, context: ServerCallContext, task_id: str) -> Turn:
    row = await runtime.db.messages.get(task_id) if 0 < len(task_id) <= MAX_ID else None
    if row is None or row.role != "assistant" or not row.conversation_id.startswith(SESSION_PREFIX):
        raise TaskNotFoundError(message=f"unknown task {task_id!r}")
    session_id = row.conversation_id[len(SESSION_PREFIX) :]
    session = await runtime.db.agents.get_session(session_id)
    if session is None or session.agent_id != agent_id_of(context):
        raise TaskNotFoundError(message=f"unknown task {task_id!r}")
    try:
        rows = await runtime.conversations.messages(caller_of(context), row.conversation_id)
    except UnknownConversationError:
        raise TaskNotFoundError(message=f"unknown task {task_id!r}") from None
    row = next((r for r in rows if r.id == task_id), row)
    return Turn(row, users_of(rows, row), session_id)


async def find_session(
    runtime: Runtime, context: ServerCallContext, context_id: str
) -> tuple[str, bool]:
    """The session of ``context_id`` (created when new: then True)."""
    agents = runtime.db.agents
    agent_id = agent_id_of(context)
    if not context_id:
        session = await agents.create_session(agent_id, title="a2a", settings={})
        return session.id, True
    if len(context_id) > MAX_ID:
        raise InvalidParamsError(message=f"contextId has at most {MAX_ID} characters")
    found = await agents.get_session(context_id)
    if found is None:
        found = await agents.create_session(
            agent_id, title="a2a", settings={}, session_id=context_id
        )
        return found.id, True
    if found.agent_id != agent_id:
        raise InvalidParamsError(message=f"context {context_id!r} belongs to another agent")
    return found.id, False


def message_parts(runtime: Runtime, message: Message) -> list[dict[str, Any]]:
    texts = [p.text for p in message.parts if p.text]
    if not texts:
        raise InvalidParamsError(message="message: Drupe agents take text parts only")
    limit = runtime.settings.limits.max_message_chars
    chars = sum(len(t) for t in texts)
    if chars > limit:
        raise InvalidParamsError(message=f"message: {chars} characters; the limit is {limit}")
    return [{"type": "text", "text": t} for t in texts]


def users_of(rows: Sequence[MessageRecord], answer: MessageRecord) -> list[MessageRecord]:
    """The user rows ``answer`` answers: its parent, and the steers sent into its turn."""
    by_id = {r.id: r for r in rows}
    parent = by_id.get(answer.parent_id or "")
    users = [parent] if parent is not None and parent.role == "user" else []
    for row in rows:
        if (
            row.role == "user"
            and row is not parent
            and (row.metadata or {}).get("steer")
            and row.created_at >= answer.created_at
            and row.created_at <= answer.updated_at
        ):
            users.append(row)
    return users


async def list_tasks(
    runtime: Runtime, params: ListTasksRequest, context: ServerCallContext
) -> ListTasksResponse:
    """``ListTasks``: the agent's tasks (of one context, when given), newest first; pages of at
    most ``MAX_PAGE``, the page token is an offset."""
    agents = runtime.db.agents
    agent_id = agent_id_of(context)
    if params.context_id:
        found = await agents.get_session(params.context_id)
        sessions = [found] if found is not None and found.agent_id == agent_id else []
    else:
        sessions = await agents.list_sessions(agent_id)
    size = params.page_size or DEFAULT_PAGE
    if not 0 < size <= MAX_PAGE:
        raise InvalidParamsError(message=f"pageSize is 1 to {MAX_PAGE}")
    try:
        offset = int(params.page_token or "0")
    except ValueError:
        raise InvalidParamsError(message="pageToken: not a token of this server") from None
    turns: list[Turn] = []
    caller = caller_of(context)
    for session in sessions:
        conversation_id = session_conversation_id(session.id)
        try:
            rows = await runtime.conversations.messages(caller, conversation_id)
        except UnknownConversationError:
            continue
        turns += [Turn(r, users_of(rows, r), session.id) for r in rows if r.role == "assistant"]
    tasks = [
        t.task(
            history_length=params.history_length if params.HasField("history_length") else None,
            artifacts=params.include_artifacts,
        )
        for t in sorted(turns, key=lambda t: t.row.updated_at, reverse=True)
    ]
    if params.status:
        tasks = [t for t in tasks if t.status.state == params.status]
    page = tasks[offset : offset + size]
    following = offset + size
    return ListTasksResponse(
        tasks=page,
        next_page_token=str(following) if following < len(tasks) else "",
        page_size=size,
        total_size=len(tasks),
    )
