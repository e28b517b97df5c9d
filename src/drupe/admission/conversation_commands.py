"""Commands on a conversation that the HTTP edge and cluster routing share: stop, approvals.

Contract: each runs on the node that owns the conversation (in one process, always here; in
cluster mode the port routes it to the owner first, ``drupe.cluster.router``).

* ``stop_conversation``: an agent session is stopped through its host first (it may be between
  turns: a steer roll, a queued follow-up; the host stops the runtime turn, drops the queue and
  closes the connection), then the live stream is aborted and drained; returns whether
  anything was stopped. Returns after the partial answer is persisted.
* ``close_session``: an agent session's turn is stopped, its queue dropped and its runtime
  connection closed (deleting a session).
* ``answer_approvals``: agent approvals are answered in place (the driver holds the pending
  decision); chat approvals go through the ``ApprovalService`` (an answered turn continues in
  the same message).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from drupe.admission.approval_service import ApprovalOutcome, ApprovalService
from drupe.ids import session_conversation_id, session_id_of
from drupe.streaming.approval_rules import Decision
from drupe.streaming.listeners.base import Listener
from drupe.streaming.manager import StreamManager

if TYPE_CHECKING:
    from drupe.sessions.host import AgentSessionHost

__all__ = ["answer_approvals", "close_session", "stop_conversation"]


async def stop_conversation(
    manager: StreamManager,
    sessions: AgentSessionHost | None,
    conversation_id: str,
    reason: str = "user-stop",
) -> bool:
    session_id = session_id_of(conversation_id)
    if session_id is not None and sessions is not None:
        live = manager.is_live(conversation_id)
        stopped = await sessions.stop(session_id)
        await manager.abort_and_drain(conversation_id, reason)
        return stopped or live
    return await manager.abort_and_drain(conversation_id, reason)


async def close_session(
    manager: StreamManager, sessions: AgentSessionHost | None, session_id: str
) -> None:
    """Stop the session's live turn (its partial persisted), drop its queue and connection."""
    conversation_id = session_conversation_id(session_id)
    if sessions is not None:
        await sessions.forget(session_id)
    await manager.abort_and_drain(conversation_id, "conversation-deleted")


async def answer_approvals(
    service: ApprovalService,
    sessions: AgentSessionHost | None,
    conversation_id: str,
    decisions: Sequence[Decision],
    subscribers: Sequence[Listener] = (),
) -> ApprovalOutcome:
    session_id = session_id_of(conversation_id)
    if session_id is not None and sessions is not None:
        answered = [
            await sessions.respond_approval(
                session_id, d.approval_id, approved=d.approved, reason=d.reason
            )
            for d in decisions
        ]
        return ApprovalOutcome(
            ok=all(answered),
            continued=any(answered),
            message_id=None,
            pending=0,
            reason=None if all(answered) else "unknown or already answered approval id",
        )
    return await service.respond(conversation_id, list(decisions), subscribers)
