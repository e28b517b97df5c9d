"""AG-UI threads: which conversation a run on ``target`` in ``threadId`` talks to.

Contract:

* ``conversation_of``: for a model id, the conversation ``threadId`` itself (a thread id with
  an agent-session or ``gateway:`` prefix is refused) and that model; for ``agent:<id>``, the
  agent's session ``threadId`` (created on first use; then its id is returned so a refused run
  can delete it again; a session of another agent is a 409); for ``agent-session:<id>``, that
  session. An unknown model, agent or session is a 404; a thread id is 1 to ``MAX_ID``
  characters (else 400).
* ``existing_conversation``: the conversation a thread of ``target`` already has; never
  creates (404 when it has none).
* Refusals are ``GatewayError``s whose JSON body is AG-UI's ``RUN_ERROR`` event
  (``run_error_body``; ``bad_input`` keeps a bad ``RunAgentInput``'s own code).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ag_ui.core import RunErrorEvent

from drupe.errors import ConfigError
from drupe.gateway.limits import AGENT_PREFIX
from drupe.gateway.prompt import GatewayError, GatewayFailure
from drupe.ids import SESSION_PREFIX, session_conversation_id
from drupe.protocols.agui.request import BadRunInput

if TYPE_CHECKING:
    from drupe.app import Runtime

__all__ = [
    "MAX_ID",
    "bad_input",
    "conversation_of",
    "existing_conversation",
    "refuse",
    "run_error_body",
]

MAX_ID = 256


def run_error_body(failure: GatewayFailure) -> dict[str, Any]:
    """A refusal in AG-UI's shape: the ``RUN_ERROR`` event as the JSON body."""
    event = RunErrorEvent(message=failure.message, code=failure.kind)
    return event.model_dump(mode="json", by_alias=True, exclude_none=True)


def refuse(status: int, kind: str, message: str) -> GatewayError:
    return GatewayError(GatewayFailure(status, kind, message), run_error_body)  # type: ignore[arg-type]


def bad_input(err: BadRunInput) -> GatewayError:
    failure = GatewayFailure(err.status, "invalid_request", err.message)
    return GatewayError(failure, lambda f: {**run_error_body(f), "code": err.code})


async def conversation_of(
    runtime: Runtime, target: str, thread_id: str
) -> tuple[str, list[str], str | None]:
    """The conversation and the model ids a run on ``target`` in ``thread_id`` submits to, and
    the session it created for the thread (None: it existed, or the target is a model)."""
    if not 0 < len(thread_id) <= MAX_ID:
        raise refuse(400, "invalid_request", f"threadId has 1 to {MAX_ID} characters")
    agents = runtime.db.agents
    if target.startswith(AGENT_PREFIX):
        agent_id = target[len(AGENT_PREFIX) :]
        if not 0 < len(agent_id) <= MAX_ID or await agents.get_agent(agent_id) is None:
            raise refuse(404, "not_found", f"unknown agent {agent_id!r}")
        session = await agents.get_session(thread_id)
        created = None
        if session is None:
            session = await agents.create_session(
                agent_id, title="ag-ui", settings={}, session_id=thread_id
            )
            created = session.id
        elif session.agent_id != agent_id:
            raise refuse(
                409, "conflict", f"thread {thread_id!r} is a session of agent {session.agent_id!r}"
            )
        return session_conversation_id(session.id), [], created
    if target.startswith(SESSION_PREFIX):
        session_id = target[len(SESSION_PREFIX) :]
        found = await agents.get_session(session_id) if 0 < len(session_id) <= MAX_ID else None
        if found is None:
            raise refuse(404, "not_found", f"unknown agent session {session_id!r}")
        return session_conversation_id(found.id), [], None
    try:
        runtime.models.resolve(target)
    except ConfigError as err:
        raise refuse(404, "not_found", f"unknown model {target!r}: {err}") from None
    if thread_id.startswith((SESSION_PREFIX, "gateway:")):
        raise refuse(400, "invalid_request", "threadId: that prefix names agent sessions")
    return thread_id, [target], None


async def existing_conversation(runtime: Runtime, target: str, thread_id: str) -> str:
    """The conversation a thread of ``target`` already has (404 when it has none)."""
    agents = runtime.db.agents
    for prefix in (AGENT_PREFIX, SESSION_PREFIX):
        if target.startswith(prefix):
            session_id = thread_id if prefix == AGENT_PREFIX else target[len(prefix) :]
            found = await agents.get_session(session_id) if 0 < len(session_id) <= MAX_ID else None
            if found is None or (
                prefix == AGENT_PREFIX and found.agent_id != target[len(AGENT_PREFIX) :]
            ):
                raise refuse(404, "not_found", f"no thread {thread_id!r} of {target!r}")
            return session_conversation_id(found.id)
    if not 0 < len(thread_id) <= MAX_ID:
        raise refuse(400, "invalid_request", f"threadId has 1 to {MAX_ID} characters")
    return thread_id
