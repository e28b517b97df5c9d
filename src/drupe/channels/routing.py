"""``ConversationRouter``: the port through which channel chats reach a cluster's owner nodes.

Contract: in cluster mode (``drupe.cluster.chat.ClusterChat`` implements it) a chat's submit,
``/stop``, and the tool approvals answered by the chat's buttons go to the node that owns the
conversation (or run here when no node does), and the chat's ``ChannelListener`` is fed from
the chunk log by a ``Following`` that watches every turn of the conversation from the moment it
is created, on the node that receives the chat. Without a router (one process) chats dispatch
locally with their listener attached to the stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from drupe.admission.approvals import ApprovalOutcome
    from drupe.admission.base import Submit
    from drupe.streaming.approvals import Decision
    from drupe.streaming.listeners.channel import ChannelListener

__all__ = ["ConversationRouter", "Following"]


class Following(Protocol):
    async def follow_next(self, after_turn_id: str | None) -> None: ...

    def close(self) -> None: ...


class ConversationRouter(Protocol):
    async def dispatch(self, request: Submit) -> Any: ...

    async def stop(self, conversation_id: str) -> bool: ...

    async def approvals(
        self, conversation_id: str, decisions: list[Decision]
    ) -> ApprovalOutcome: ...

    def follower(self, conversation_id: str, listener: ChannelListener) -> Following: ...
