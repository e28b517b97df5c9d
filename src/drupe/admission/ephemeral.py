"""``EphemeralProvider``: in-memory conversations that are never written to the database (§4.3).

One model per turn. It refuses regenerate, continue-conversation and steer continuations, and a
submit while a turn is live (an ephemeral chat has no steer queue: refusing is what keeps a
message from being silently dropped) unless it asks for ``interrupt``; ``rollback`` is refused.
Rows live in ``EphemeralStore`` until the process exits or the conversation is deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from drupe.admission.base import (
    DispatchRequest,
    PreparedDispatch,
    Runner,
    Strategy,
    Submit,
    TurnSpec,
)
from drupe.admission.turn_input import check_parts
from drupe.chunks.types import UIMessage
from drupe.errors import AdmissionError, UnknownConversationError
from drupe.ids import new_message_id
from drupe.streaming.contracts import ExecutionSpec
from drupe.streaming.listeners.base import Listener
from drupe.streaming.listeners.persistence import PersistenceListener

__all__ = ["EphemeralBackend", "EphemeralProvider", "EphemeralRow", "EphemeralStore"]


@dataclass(slots=True)
class EphemeralRow:
    message: UIMessage
    status: str
    model_id: str | None = None


@dataclass(slots=True)
class EphemeralConversation:
    conversation_id: str
    title: str | None = None
    rows: list[EphemeralRow] = field(default_factory=list)
    owner_id: str | None = None


class EphemeralStore:
    """The in-memory rows of ephemeral conversations."""

    def __init__(self) -> None:
        self.conversations: dict[str, EphemeralConversation] = {}

    def create(
        self,
        conversation_id: str | None = None,
        *,
        title: str | None = None,
        owner_id: str | None = None,
    ) -> str:
        conversation_id = conversation_id or f"eph_{new_message_id()[4:]}"
        self.conversations[conversation_id] = EphemeralConversation(
            conversation_id, title, owner_id=owner_id
        )
        return conversation_id

    def get(self, conversation_id: str) -> EphemeralConversation | None:
        return self.conversations.get(conversation_id)

    def delete(self, conversation_id: str) -> bool:
        return self.conversations.pop(conversation_id, None) is not None


@dataclass(slots=True)
class EphemeralBackend:
    """Settles the assistant row of an ephemeral conversation."""

    conversation: EphemeralConversation
    row: EphemeralRow
    kind: str = "memory"
    persists_empty_terminal: bool = True
    checkpoint_target: None = None
    """In memory: nothing to checkpoint (a crash loses the conversation anyway)."""

    async def persist_assistant(
        self,
        *,
        message: UIMessage,
        status: Literal["success", "paused", "error"],
        model_id: str | None,
        stats: Mapping[str, Any],
    ) -> None:
        self.row.message = {**message, "id": self.row.message["id"]}
        self.row.status = status

    async def mark_terminal_error(self) -> bool:
        self.row.status = "error"
        return True


class EphemeralProvider:
    """Prepares turns of in-memory conversations."""

    def __init__(
        self,
        store: EphemeralStore,
        *,
        runner: Runner,
        default_model: Callable[[], str],
        validate_model: Callable[[str], None] = lambda model_id: None,
    ) -> None:
        self.store = store
        self.runner = runner
        self.default_model = default_model
        self.validate_model = validate_model

    strategies: frozenset[Strategy] = frozenset(("interrupt", "reject"))
    """No steer queue (``enqueue``) and no stored turn to roll back (``rollback``)."""

    def busy(self, conversation_id: str) -> bool:
        return False  # a live stream is the only busy state

    async def can_handle(self, conversation_id: str) -> bool:
        return self.store.get(conversation_id) is not None

    async def check(self, request: Submit) -> None:
        if self.store.get(request.conversation_id) is None:
            raise UnknownConversationError(request.conversation_id)
        check_parts(request.parts)
        self.validate_model(request.model_ids[0] if request.model_ids else self.default_model())

    async def rollback(self, conversation_id: str, placeholder_ids: Sequence[str]) -> str | None:
        raise AdmissionError("unsupported", "an ephemeral conversation cannot roll back a turn")

    async def prepare(
        self,
        request: DispatchRequest,
        subscribers: Sequence[Listener],
        *,
        has_live_stream: bool,
    ) -> PreparedDispatch:
        conversation = self.store.get(request.conversation_id)
        if conversation is None:
            raise UnknownConversationError(request.conversation_id)
        if not isinstance(request, Submit):
            raise AdmissionError("unsupported", "an ephemeral conversation only takes new messages")
        if has_live_stream:
            raise AdmissionError(
                "live",
                f"conversation {request.conversation_id!r} is answering; an ephemeral "
                "conversation has no steer queue, so send again when it is done",
            )
        parts = check_parts(request.parts)
        model_id = request.model_ids[0] if request.model_ids else self.default_model()
        self.validate_model(model_id)
        user: UIMessage = {"id": new_message_id(), "role": "user", "parts": parts}
        answer = EphemeralRow(
            message={"id": new_message_id(), "role": "assistant", "parts": []},
            status="pending",
            model_id=model_id,
        )
        history = [row.message for row in conversation.rows if row.status != "pending"]
        conversation.rows.append(EphemeralRow(message=user, status="success"))
        conversation.rows.append(answer)
        spec = TurnSpec(
            conversation_id=request.conversation_id,
            message_id=answer.message["id"],
            model_id=model_id,
            messages=[*history, user],
        )
        listener = PersistenceListener(
            EphemeralBackend(conversation, answer),
            model_id=model_id,
            conversation_id=request.conversation_id,
        )
        runner = self.runner
        return PreparedDispatch(
            conversation_id=request.conversation_id,
            executions=[
                ExecutionSpec(
                    model_id=model_id,
                    source=lambda: runner(spec),
                    anchor_message_id=answer.message["id"],
                )
            ],
            listeners=[*subscribers, listener],
            user_message_id=user["id"],
            placeholder_ids=[answer.message["id"]],
            persistent=False,
        )
