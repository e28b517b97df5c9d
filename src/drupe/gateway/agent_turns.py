"""Agent turns over the gateway: the model ``agent:<agentId>`` or ``agent-session:<sessionId>``.

``agent_turn(runtime, model_id, spec)`` resolves the session (``agent:<agentId>`` opens a new
session of that agent; its id goes back in the ``x-drupe-session-id`` header) and returns an
``AgentTurnStream``: a ``GatewayStream`` that submits the request's LAST user message to the
session through the dispatcher, exactly like ``POST /api/chat`` does. The session keeps its
own history, so earlier messages of the request are not replayed. The turn is the session's
ordinary turn: persisted, in the same conversation stream, so a web UI tab watching
``agent-session:<id>`` sees it live.

The gateway response only subscribes: a client that disconnects (or goes idle) detaches and
never stops the turn (invariant 2); ``POST /api/chat/{id}/stop`` stops it. A session that is
already answering is refused with 409 (nothing stored): a gateway request answers its own
message, not a queued one.

The turn is admitted through the ``Conversations`` port with the ``reject`` strategy. In cluster
mode it runs on the node that holds the session's lease (the one whose host has the session's
driver, e.g. within its grace period after a turn), or here when no node holds it; the response
follows the turn from the chunk log on whichever node the request reached.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from drupe.admission.base import Submit
from drupe.admission.conversations import Admitted
from drupe.admission.principal import Principal
from drupe.chunks.types import UIMessage
from drupe.errors import (
    AdmissionError,
    DrupeError,
    NotFoundError,
    OwnerUnavailableError,
    UnknownConversationError,
)
from drupe.gateway.limits import AGENT_PREFIX, SESSION_PREFIX
from drupe.gateway.prompt import ErrorBodyFn, GatewayError, GatewayFailure, PromptListener
from drupe.persistence.agents import session_conversation_id

if TYPE_CHECKING:
    from drupe.app import Runtime

__all__ = ["AgentTurn", "AgentTurnStream", "agent_turn", "is_agent_model"]


def is_agent_model(model_id: str) -> bool:
    return model_id.startswith((AGENT_PREFIX, SESSION_PREFIX))


@dataclass(frozen=True, slots=True)
class AgentTurn:
    stream: AgentTurnStream
    session_id: str


def _last_user_parts(messages: Sequence[UIMessage], fail: ErrorBodyFn) -> list[dict[str, object]]:
    if not messages or messages[-1]["role"] != "user":
        raise GatewayError(
            GatewayFailure(
                400,
                "invalid_request",
                "an agent turn answers the request's last message, which must be a user "
                "message (the session keeps its own history)",
            ),
            fail,
        )
    return [dict(part) for part in messages[-1]["parts"]]


async def agent_turn(
    runtime: Runtime,
    model_id: str,
    messages: Sequence[UIMessage],
    error_body: ErrorBodyFn,
    caller: Principal | None,
) -> AgentTurn:
    """Resolve the session ``model_id`` names (404 when there is none, or when it is not the
    caller's: the key acts as its owner) and prepare the turn."""
    parts = _last_user_parts(messages, error_body)
    if caller is None:
        raise GatewayError(
            GatewayFailure(401, "authentication", "an agent turn needs an API key of a user"),
            error_body,
        )
    agents = runtime.db.agents
    resources = runtime.resources
    if model_id.startswith(AGENT_PREFIX):
        agent_id = model_id[len(AGENT_PREFIX) :]
        agent = await agents.get_agent(agent_id) if 0 < len(agent_id) <= 256 else None
        if agent is not None and resources is not None:
            try:
                await resources.agent(caller, agent_id, "read")
            except NotFoundError:
                agent = None
        if agent is None:
            raise GatewayError(
                GatewayFailure(404, "not_found", f"unknown agent {agent_id!r} (GET /v1/agents)"),
                error_body,
            )
        session = await agents.create_session(
            agent_id,
            title="gateway",
            settings={},
            owner_id=resources.owner_of_new(caller) if resources is not None else None,
        )
    else:
        session_id = model_id[len(SESSION_PREFIX) :]
        found = await agents.get_session(session_id) if 0 < len(session_id) <= 256 else None
        if found is not None and resources is not None:
            try:
                await resources.session(caller, session_id)
            except NotFoundError:
                found = None
        if found is None:
            raise GatewayError(
                GatewayFailure(404, "not_found", f"unknown agent session {session_id!r}"),
                error_body,
            )
        session = found
    stream = AgentTurnStream(runtime, session.id, parts, error_body, caller)
    return AgentTurn(stream, session.id)


class AgentTurnStream:
    """One gateway request's subscription to a turn it submits to an agent session."""

    def __init__(
        self,
        runtime: Runtime,
        session_id: str,
        parts: list[dict[str, object]],
        error_body: ErrorBodyFn,
        caller: Principal,
    ) -> None:
        self.runtime = runtime
        self.session_id = session_id
        self.parts = parts
        self.error_body = error_body
        self.conversation_id = session_conversation_id(session_id)
        self.listener = PromptListener(f"gateway-agent:{uuid.uuid4().hex}")
        self.caller = caller
        self._admitted: Admitted | None = None

    def _refuse(self, status: int, kind: str, message: str) -> GatewayError:
        return GatewayError(GatewayFailure(status, kind, message), self.error_body)  # type: ignore[arg-type]

    async def start(self) -> None:
        # ``reject``: a session with a turn live or queued refuses before anything is written.
        submit = Submit(conversation_id=self.conversation_id, parts=self.parts, strategy="reject")
        try:
            self._admitted = await self.runtime.conversations.submit(
                self.caller, submit, listener=self.listener
            )
        except AdmissionError as err:
            if err.reason == "busy":
                raise self._refuse(409, "conflict", str(err)) from None
            raise
        except UnknownConversationError as err:
            raise self._refuse(404, "not_found", str(err)) from None
        except OwnerUnavailableError:
            raise  # 503 with Retry-After (the gateway's error mapping)
        except DrupeError as err:
            raise self._refuse(400, "invalid_request", str(err)) from None
        result = self._admitted.result
        if result.mode != "started" or result.turn_id is None or not result.execution_ids:
            self._detach()
            raise self._refuse(409, "conflict", f"agent session {self.session_id!r} is answering")

    def _detach(self) -> None:
        self.listener.closed = True
        admitted, self._admitted = self._admitted, None
        if admitted is not None:
            admitted.close()

    def abort(self, reason: str) -> bool:
        self._detach()  # a subscriber leaving never stops the session's turn
        return False

    async def close(self) -> None:
        self._detach()
