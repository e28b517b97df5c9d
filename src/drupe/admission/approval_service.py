"""``ApprovalService``: take human decisions on chat tool approvals (reference §8, scenario 22).

Under the conversation's admission lock: find the assistant row that holds the approval ids,
apply the decisions atomically and idempotently (pure rules in ``drupe.streaming.approval_rules``)
and store them; while other approvals on the row are pending, that is all. Once every approval
of the row is decided, dispatch a continue-conversation turn that updates the SAME row
(``pending`` -> terminal) with its original model. A continuation racing a live submit is
refused with ``ok=False`` (never silently dropped); the decisions stay stored, so a later call
with no new decision can still continue. A repeat of stored decisions whose continuation
already ran (every decided call has its output) changes nothing and continues nothing
(``reason = "already decided"``): a double click never answers twice.

Cluster mode: ``fence_for(conversation_id)`` gives this node's fencing token (None: single
node); the stored decisions are a fenced write, and the continuation's provider fences the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from drupe.admission.base import ContinueConversation
from drupe.admission.dispatch import Dispatcher
from drupe.errors import ValidationError
from drupe.streaming.approval_rules import Decision, apply_decisions
from drupe.streaming.listeners.base import Listener

if TYPE_CHECKING:
    from drupe.persistence.messages import MessageStore
    from drupe.persistence.records import MessageRecord

__all__ = ["ApprovalOutcome", "ApprovalService"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalOutcome:
    ok: bool
    continued: bool
    message_id: str | None = None
    pending: int = 0
    reason: str | None = None


class ApprovalService:
    def __init__(
        self,
        dispatcher: Dispatcher,
        messages: MessageStore,
        *,
        fence_for: Callable[[str], int | None] = lambda conversation_id: None,
    ) -> None:
        self.dispatcher = dispatcher
        self.messages = messages
        self.fence_for = fence_for

    async def respond(
        self,
        conversation_id: str,
        decisions: Sequence[Decision],
        subscribers: Sequence[Listener] = (),
    ) -> ApprovalOutcome:
        """Record ``decisions``; continue the turn once its row has no pending approval.

        ``subscribers`` are attached to the continuation (an IM chat that answered by button
        receives the rest of the answer).
        """
        if not decisions:
            raise ValidationError("no decisions were given")
        manager = self.dispatcher.manager
        # Cluster mode: only the owner answers (a node without the lease raises NotOwnerError
        # before anything is written; callers route to the owner, ``drupe.cluster.router``).
        async with (
            self.dispatcher.ownership.hold(conversation_id),
            manager.conversation_lock(conversation_id),
        ):
            row = await self._anchor(conversation_id, {d.approval_id for d in decisions})
            result = apply_decisions(row.parts, decisions)
            if result.changed:
                await self.messages.finalize_assistant(
                    row.id,
                    parts=result.parts,
                    status="success",
                    fence=self.fence_for(conversation_id),
                )
            if result.still_pending:
                return ApprovalOutcome(
                    ok=True, continued=False, message_id=row.id, pending=len(result.still_pending)
                )
            if not result.changed and not _awaiting_continuation(result.parts):
                # A repeat (a double click, a stale button): its continuation already ran.
                return ApprovalOutcome(
                    ok=True, continued=False, message_id=row.id, reason="already decided"
                )
            if manager.is_live(conversation_id):
                return ApprovalOutcome(
                    ok=False,
                    continued=False,
                    message_id=row.id,
                    reason=f"conversation {conversation_id!r} is answering another message",
                )
            if row.status == "pending":
                return ApprovalOutcome(ok=True, continued=False, message_id=row.id)
            await self.dispatcher.dispatch_locked(
                ContinueConversation(conversation_id=conversation_id, anchor_id=row.id),
                subscribers,
            )
            return ApprovalOutcome(ok=True, continued=True, message_id=row.id)

    async def _anchor(self, conversation_id: str, approval_ids: set[str]) -> MessageRecord:
        rows = await self.messages.list_for_conversation(conversation_id)
        for row in reversed(rows):
            if row.role != "assistant":
                continue
            ids = {
                str(p["approval"]["id"])
                for p in row.parts
                if isinstance(p.get("approval"), dict) and "id" in p["approval"]
            }
            if approval_ids & ids:
                if not approval_ids <= ids:
                    raise ValidationError("the decisions name approvals of different messages")
                return row
        raise ValidationError(
            f"no message of conversation {conversation_id!r} asks for approval "
            f"{sorted(approval_ids)!r}"
        )


def _awaiting_continuation(parts: list[dict[str, Any]]) -> bool:
    """Whether a decided tool call still waits for its continuation (no output yet)."""
    return any(p.get("state") == "approval-responded" for p in parts)
