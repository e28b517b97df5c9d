"""``AgentSessionProvider``: turns of ``agent-session:<sessionId>`` conversations (§4.4).

Validation, before anything is written: only a submit; the session exists and has an agent; the
agent has a model; a driver is registered for its type; ``driver.validate_session`` accepts the
session (for example, its workspace exists or can be created).

Begin vs enqueue is decided by ``AgentSessionHost.is_busy`` (runtime state), never by
``has_live_stream`` (false in the gap between two turns while the host is mid-drain):

* idle: the user row and a ``pending`` assistant row are written in ONE transaction, the host
  registers the turn (``begin_turn``) and the execution's source is the host's turn stream;
  listeners = subscribers + the host's persistence and terminal listeners;
* busy: only the user row is written (``success``, marked as a steer), the host redirects it into
  the live turn or queues it, and the subscribers are only attached (an inject).

Both writes carry ``host.fence_for(conversation)`` (cluster mode: this node's fencing token).
It never calls ``StreamManager.send`` itself: the dispatcher does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from drupe.admission.base import DispatchRequest, PreparedDispatch, Strategy, Submit
from drupe.admission.turn_input import check_parts
from drupe.chunks.types import UIMessage
from drupe.errors import AdmissionError, UnknownConversationError, ValidationError
from drupe.ids import new_message_id, next_turn_id, session_id_of
from drupe.persistence.records import NewMessage, NewPlaceholder
from drupe.sessions.drivers.registry import DriverRegistry
from drupe.sessions.state import FollowUp, TurnInfo, turn_config
from drupe.streaming.listeners.base import Listener

if TYPE_CHECKING:
    from drupe.persistence.messages import MessageStore
    from drupe.sessions.drivers.base import SessionInfo
    from drupe.sessions.host import AgentSessionHost

__all__ = ["AgentSessionProvider"]


class AgentSessionProvider:
    """Prepares the turns of agent sessions; put it FIRST in the dispatcher's providers."""

    def __init__(
        self, *, host: AgentSessionHost, messages: MessageStore, drivers: DriverRegistry
    ) -> None:
        self.host = host
        self.messages = messages
        self.drivers = drivers

    strategies: frozenset[Strategy] = frozenset(("enqueue", "reject"))
    """A busy session queues (or redirects) the message; it is stopped through its own stop
    route, never by another submit, and its transcript cannot be rolled back."""

    def busy(self, conversation_id: str) -> bool:
        session_id = session_id_of(conversation_id)
        return session_id is not None and self.host.is_busy(session_id)

    async def can_handle(self, conversation_id: str) -> bool:
        return session_id_of(conversation_id) is not None

    async def check(self, request: Submit) -> None:
        await self._validated(request.conversation_id)
        check_parts(request.parts)

    async def rollback(self, conversation_id: str, placeholder_ids: Sequence[str]) -> str | None:
        raise AdmissionError("unsupported", "an agent session cannot roll back a turn")

    async def prepare(
        self,
        request: DispatchRequest,
        subscribers: Sequence[Listener],
        *,
        has_live_stream: bool,
    ) -> PreparedDispatch:
        if not isinstance(request, Submit):
            raise AdmissionError(
                "unsupported", "agent sessions take new messages only (no regenerate/continue)"
            )
        if request.new_root:
            raise AdmissionError(
                "unsupported", "agent sessions keep one history: the first message cannot be edited"
            )
        info = await self._validated(request.conversation_id)
        parts = check_parts(request.parts)
        metadata: dict[str, Any] = dict(request.metadata or {})
        headless = bool(metadata.get("headless"))
        parent_id = request.parent_id
        if parent_id is None:
            leaf = await self.messages.latest_leaf(request.conversation_id)
            parent_id = leaf.id if leaf is not None else None
        config = turn_config(info.model_id)
        if self.host.is_busy(info.session_id):
            return await self._enqueue(request, info, parts, metadata, parent_id, subscribers)
        user = NewMessage(id=new_message_id(), parts=parts, metadata=metadata or None)
        placeholder = NewPlaceholder(message_id=new_message_id(), model_id=info.model_id)
        await self.messages.create_turn(
            request.conversation_id,
            user_message=user,
            parent_id=parent_id,
            placeholders=[placeholder],
            fence=self.host.fence_for(request.conversation_id),
        )
        user_ui: UIMessage = {"id": user.id, "role": "user", "parts": parts}
        turn = TurnInfo(
            turn_id=next_turn_id(),
            assistant_message_id=placeholder.message_id,
            user_message_id=user.id,
            config=config,
            message=user_ui,
            headless=headless,
        )
        listeners = self.host.begin_turn(info, turn)
        return PreparedDispatch(
            conversation_id=request.conversation_id,
            executions=[self.host.execution_spec(info.session_id, turn)],
            listeners=[*subscribers, *listeners],
            user_message_id=user.id,
            placeholder_ids=[placeholder.message_id],
        )

    async def _enqueue(
        self,
        request: Submit,
        info: SessionInfo,
        parts: list[dict[str, Any]],
        metadata: dict[str, Any],
        parent_id: str | None,
        subscribers: Sequence[Listener],
    ) -> PreparedDispatch:
        metadata = {**metadata, "steer": True, "modelId": info.model_id}
        row = await self.messages.create_user_message(
            request.conversation_id,
            message=NewMessage(id=new_message_id(), parts=parts, metadata=metadata),
            parent_id=parent_id,
            fence=self.host.fence_for(request.conversation_id),
        )
        item = FollowUp(
            user_message_id=row.id,
            message={"id": row.id, "role": "user", "parts": parts},
            config=turn_config(info.model_id),
            steer=True,
            headless=bool(metadata.get("headless")),
        )
        # With no stream to join (busy only through compaction or a launch that has not
        # started one yet), the subscribers wait in the host for the next launched turn.
        joinable = self.host.manager.get(request.conversation_id) is not None
        outcome = await self.host.enqueue_user_message(info, item, () if joinable else subscribers)
        return PreparedDispatch(
            conversation_id=request.conversation_id,
            listeners=list(subscribers) if joinable else [],
            user_message_id=row.id,
            extra={"agentSession": outcome},
        )

    async def _validated(self, conversation_id: str) -> SessionInfo:
        session_id = session_id_of(conversation_id)
        info = await self.host.lookup.load(session_id) if session_id else None
        if info is None:
            raise UnknownConversationError(conversation_id)
        if not info.model_id:
            raise ValidationError(f"agent {info.agent_id!r} has no model")
        if info.driver_type not in self.drivers:
            raise ValidationError(f"no agent driver of type {info.driver_type!r} is registered")
        self.drivers.get(info.driver_type).validate_session(info)
        return info
