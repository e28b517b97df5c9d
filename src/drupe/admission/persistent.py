"""``PersistentProvider``: database-backed conversations, the catch-all provider (§4.2).

* submit, not live: resolve the models (duplicates and unknown models are refused before any
  write), then write the user row and one ``pending`` placeholder per model in ONE transaction;
  listeners = subscribers + one persistence listener per model (it checkpoints the live answer
  into its placeholder when a checkpointer is given, and hands failed terminal writes to the
  retrier);
* submit, live: the steer branch. The user row is written (status ``success``, stamped with the
  model that will answer it) and the subscribers are only attached; dispatch queues the steer;
* regenerate: refused while live; new placeholders under the existing user row;
* steer continuation: one placeholder under the steer row, answered by the model stamped on it;
  the model-facing copy of the steer is wrapped as a steer reminder (the stored row is untouched);
* continue-conversation (approvals): the anchor row goes back to ``pending`` and is continued by
  its original model; its chunks extend the stored message.

Cluster mode: ``fence_for(conversation_id)`` gives this node's fencing token for the conversation
(None: single node). Every row a turn writes carries it (the user row, the placeholders, the
reopened anchor), and so does each placeholder's ``PlaceholderBackend`` (checkpoints and the
terminal write), so an owner that lost its lease writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from drupe.admission.base import (
    ALL_STRATEGIES,
    ContinueConversation,
    DispatchRequest,
    PreparedDispatch,
    Regenerate,
    Runner,
    SteerContinuation,
    Strategy,
    Submit,
    TurnSpec,
)
from drupe.admission.turn_input import check_models, check_parts
from drupe.chunks.types import UIMessage
from drupe.errors import (
    AdmissionError,
    UnknownConversationError,
    ValidationError,
)
from drupe.ids import is_session_conversation, new_message_id
from drupe.persistence.backends import PlaceholderBackend
from drupe.persistence.records import MessageRecord, NewMessage, NewPlaceholder
from drupe.streaming.checkpoints import Checkpointer
from drupe.streaming.contracts import ExecutionSpec
from drupe.streaming.listeners.base import Listener
from drupe.streaming.listeners.persistence import PersistenceListener
from drupe.streaming.steering import PendingSteer
from drupe.streaming.terminal_writes import TerminalWriteRetrier

if TYPE_CHECKING:
    from drupe.persistence.conversations import ConversationStore
    from drupe.persistence.messages import MessageStore

__all__ = ["PersistentProvider"]


class PersistentProvider:
    """Prepares turns of conversations stored in the database."""

    def __init__(
        self,
        *,
        conversations: ConversationStore,
        messages: MessageStore,
        runner: Runner,
        default_model: Callable[[], str],
        validate_model: Callable[[str], None] = lambda model_id: None,
        has_pending_steer: Callable[[str], bool] = lambda conversation_id: False,
        checkpointer: Checkpointer | None = None,
        retrier: TerminalWriteRetrier | None = None,
        fence_for: Callable[[str], int | None] = lambda conversation_id: None,
    ) -> None:
        self.checkpointer = checkpointer
        """Saves live answers into their placeholder rows (None: only terminal writes)."""
        self.retrier = retrier
        """Keeps retrying terminal writes that failed (None: a failed write marks ``error``)."""
        self.conversations = conversations
        self.messages = messages
        self.runner = runner
        self.default_model = default_model
        self.validate_model = validate_model
        self.has_pending_steer = has_pending_steer
        self.fence_for = fence_for
        """This node's fencing token for a conversation (cluster mode); None: unfenced."""

    strategies: frozenset[Strategy] = ALL_STRATEGIES
    """Every double-texting strategy: a stored conversation can queue, interrupt and roll back."""

    def busy(self, conversation_id: str) -> bool:
        return False  # a live stream is the only busy state

    async def can_handle(self, conversation_id: str) -> bool:
        return not is_session_conversation(conversation_id)

    async def check(self, request: Submit) -> None:
        if await self.conversations.get(request.conversation_id) is None:
            raise UnknownConversationError(request.conversation_id)
        check_parts(request.parts)
        self._models(request.model_ids)

    async def prepare(
        self,
        request: DispatchRequest,
        subscribers: Sequence[Listener],
        *,
        has_live_stream: bool,
    ) -> PreparedDispatch:
        conversation_id = request.conversation_id
        parent_id = request.parent_id if isinstance(request, Submit) else None
        if isinstance(request, Submit) and parent_id is None and not request.new_root:
            # The newest row is the parent; the read raises UnknownConversationError for a
            # conversation that does not exist, so it is also the existence check (one read).
            leaf = await self.messages.latest_leaf(conversation_id)
            parent_id = leaf.id if leaf is not None else None
        elif await self.conversations.get(conversation_id) is None:
            raise UnknownConversationError(conversation_id)
        fence = self.fence_for(conversation_id)
        match request:
            case Submit():
                parts = check_parts(request.parts)
                models = self._models(request.model_ids)
                if has_live_stream:
                    return await self._steer(
                        request, parts, models[0], subscribers, fence, parent_id
                    )
                return await self._start(request, parts, models, subscribers, fence, parent_id)
            case Regenerate():
                if has_live_stream:
                    raise AdmissionError(
                        "regenerate-live",
                        f"conversation {conversation_id!r} is answering; "
                        "stop it before regenerating",
                    )
                models = self._models(request.model_ids)
                return await self._regenerate(request, models, subscribers, fence)
            case SteerContinuation():
                return await self._steer_continuation(request, subscribers, fence)
            case ContinueConversation():
                return await self._continue(request, subscribers, fence)

    # --- branches ---------------------------------------------------------------------------

    def _models(self, model_ids: Sequence[str]) -> list[str]:
        return check_models(model_ids, self.default_model, self.validate_model)

    async def _start(
        self,
        request: Submit,
        parts: list[dict[str, Any]],
        models: list[str],
        subscribers: Sequence[Listener],
        fence: int | None,
        parent_id: str | None,
    ) -> PreparedDispatch:
        conversation_id = request.conversation_id
        history = await self._history(conversation_id, parent_id)
        user = NewMessage(id=new_message_id(), parts=parts, metadata=request.metadata)
        placeholders = [NewPlaceholder(message_id=new_message_id(), model_id=m) for m in models]
        group = (
            await self.messages.next_siblings_group_id(conversation_id) if len(models) > 1 else None
        )
        await self.messages.create_turn(
            conversation_id,
            user_message=user,
            parent_id=parent_id,
            placeholders=placeholders,
            siblings_group_id=group,
            fence=fence,
        )
        user_ui: UIMessage = {"id": user.id, "role": "user", "parts": parts}
        return self._prepared(
            conversation_id,
            [*history, user_ui],
            placeholders,
            subscribers,
            user_message_id=user.id,
            group=group,
            fence=fence,
        )

    async def _steer(
        self,
        request: Submit,
        parts: list[dict[str, Any]],
        model_id: str,
        subscribers: Sequence[Listener],
        fence: int | None,
        parent_id: str | None,
    ) -> PreparedDispatch:
        conversation_id = request.conversation_id
        metadata = dict(request.metadata or {})
        metadata["steer"] = True
        metadata["modelId"] = model_id
        row = await self.messages.create_user_message(
            conversation_id,
            message=NewMessage(id=new_message_id(), parts=parts, metadata=metadata),
            parent_id=parent_id,
            fence=fence,
        )
        return PreparedDispatch(
            conversation_id=conversation_id,
            listeners=list(subscribers),
            user_message_id=row.id,
            pending_steer=PendingSteer(user_message_id=row.id, model_id=model_id),
        )

    async def _regenerate(
        self,
        request: Regenerate,
        models: list[str],
        subscribers: Sequence[Listener],
        fence: int | None,
    ) -> PreparedDispatch:
        conversation_id = request.conversation_id
        row = await self._own_message(conversation_id, request.user_message_id, role="user")
        history = await self._history(conversation_id, row.id)
        placeholders = [NewPlaceholder(message_id=new_message_id(), model_id=m) for m in models]
        group = (
            await self.messages.next_siblings_group_id(conversation_id) if len(models) > 1 else None
        )
        await self.messages.create_turn(
            conversation_id,
            user_message=None,
            parent_id=row.id,
            placeholders=placeholders,
            siblings_group_id=group,
            fence=fence,
        )
        return self._prepared(
            conversation_id,
            history,
            placeholders,
            subscribers,
            user_message_id=row.id,
            group=group,
            fence=fence,
        )

    async def _steer_continuation(
        self, request: SteerContinuation, subscribers: Sequence[Listener], fence: int | None
    ) -> PreparedDispatch:
        conversation_id = request.conversation_id
        row = await self._own_message(conversation_id, request.steer.user_message_id, role="user")
        newest = await self.messages.latest_leaf(conversation_id)
        if (
            newest is not None
            and newest.id != row.id
            and newest.role == "assistant"
            and newest.created_at >= row.created_at
        ):
            # An earlier steer was answered after this one was queued: answer this one after
            # that answer, so the model sees it and the conversation reads as one line.
            await self.messages.set_parent(row.id, newest.id)
        stamped = (row.metadata or {}).get("modelId")
        model_id = request.steer.model_id or (stamped if isinstance(stamped, str) else None)
        model_id = model_id or self.default_model()
        history = await self._history(conversation_id, row.id)
        placeholder = NewPlaceholder(message_id=new_message_id(), model_id=model_id)
        await self.messages.create_placeholder(
            conversation_id,
            message_id=placeholder.message_id,
            parent_id=row.id,
            model_id=model_id,
            fence=fence,
        )
        return self._prepared(
            conversation_id,
            history,
            [placeholder],
            subscribers,
            user_message_id=row.id,
            group=None,
            is_steer=True,
            fence=fence,
        )

    async def _continue(
        self, request: ContinueConversation, subscribers: Sequence[Listener], fence: int | None
    ) -> PreparedDispatch:
        conversation_id = request.conversation_id
        row = await self._own_message(conversation_id, request.anchor_id, role="assistant")
        if row.model_id is None:
            raise ValidationError(f"message {row.id!r} has no model to continue with")
        history = await self._history(conversation_id, row.parent_id)
        await self.messages.set_pending(row.id, parts=row.parts, fence=fence)
        seed = row.as_ui_message()
        placeholder = NewPlaceholder(message_id=row.id, model_id=row.model_id)
        return self._prepared(
            conversation_id,
            history,
            [placeholder],
            subscribers,
            user_message_id=row.parent_id,
            group=row.siblings_group_id,
            seed=seed,
            fence=fence,
        )

    async def rollback(self, conversation_id: str, placeholder_ids: Sequence[str]) -> str | None:
        """Delete a stopped turn's answer rows; return their user row (the new parent)."""
        parent: str | None = None
        for message_id in placeholder_ids:
            row = await self.messages.get(message_id)
            if row is not None and row.conversation_id == conversation_id:
                parent = parent or row.parent_id
        await self.messages.delete(placeholder_ids)
        return parent

    # --- helpers ----------------------------------------------------------------------------

    async def _own_message(
        self, conversation_id: str, message_id: str, *, role: str
    ) -> MessageRecord:
        row = await self.messages.get(message_id)
        if row is None or row.conversation_id != conversation_id:
            raise ValidationError(
                f"message {message_id!r} is not in conversation {conversation_id!r}"
            )
        if row.role != role:
            raise ValidationError(f"message {message_id!r} is not a {role} message")
        return row

    async def _history(self, conversation_id: str, leaf_id: str | None) -> list[UIMessage]:
        if leaf_id is None:
            return []
        path = await self.messages.path_to(leaf_id)
        if path and path[-1].conversation_id != conversation_id:
            raise ValidationError(f"message {leaf_id!r} is not in conversation {conversation_id!r}")
        # Pending rows belong to other live turns and rows that failed empty carry nothing useful.
        return [r.as_ui_message() for r in path if r.status != "pending"]

    def _prepared(
        self,
        conversation_id: str,
        messages: list[UIMessage],
        placeholders: Sequence[NewPlaceholder],
        subscribers: Sequence[Listener],
        *,
        user_message_id: str | None,
        group: int | None,
        is_steer: bool = False,
        seed: UIMessage | None = None,
        fence: int | None = None,
    ) -> PreparedDispatch:
        listeners: list[Listener] = list(subscribers)
        executions: list[ExecutionSpec] = []
        history = [*messages, seed] if seed is not None else messages
        for placeholder in placeholders:
            model_id = placeholder.model_id or self.default_model()
            listeners.append(
                PersistenceListener(
                    PlaceholderBackend(self.messages, placeholder.message_id, fence=fence),
                    model_id=model_id,
                    conversation_id=conversation_id,
                    checkpointer=self.checkpointer,
                    seed_message=seed,
                    retrier=self.retrier,
                )
            )
            spec = TurnSpec(
                conversation_id=conversation_id,
                message_id=placeholder.message_id,
                model_id=model_id,
                messages=history,
                is_steer=is_steer,
                steer_pending=lambda: self.has_pending_steer(conversation_id),
            )
            executions.append(
                ExecutionSpec(
                    model_id=model_id,
                    source=_bind(self.runner, spec),
                    anchor_message_id=placeholder.message_id,
                    seed_message=seed,
                )
            )
        return PreparedDispatch(
            conversation_id=conversation_id,
            executions=executions,
            listeners=listeners,
            user_message_id=user_message_id,
            placeholder_ids=[p.message_id for p in placeholders],
            siblings_group_id=group,
        )


def _bind(runner: Runner, spec: TurnSpec) -> Callable[[], Any]:
    return lambda: runner(spec)
