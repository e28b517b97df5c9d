"""``ClusterConversations``: the ``Conversations`` port on a cluster node.

Contract (the port: ``drupe.admission.conversations``; ``docs/lifecycles/cluster.md``):

* The caller's node asks the access policy, then every command runs on the conversation's
  owner node (``ClusterRouter`` routes it through Redis; with no owner it runs here and this node
  takes the lease): submit, stop, approve, delete. The owner writes the turn's announcement to
  the chunk log before the submit is acknowledged.
* A follower (an SSE response, a gateway prompt listener) on any node, the owner included,
  is fed from the chunk log (``LogFollower``): the same chunks, the owner's seqs as cursors.
* ``resume``: the newest turn of the log, from its start or exactly after the cursor; a turn
  announced and not yet written to is followed (it is live: the ``live`` hash names it); None
  only when the log has no turn, or its turn ended and the grace period is over.
* ``submit`` with ``subscribers`` (a scheduled task's sentinel and deliveries) runs on this node
  only: when another node owns the conversation it is ``busy`` there, and nothing is written.
* ``watch``: this node's status changes (other nodes' arrive through the cluster status) and
  every turn's chunks from the log. ``follow_turns``: every turn from the log.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from drupe.admission.access import Action
from drupe.admission.approval_service import ApprovalOutcome
from drupe.admission.base import Regenerate, Submit
from drupe.admission.conversations import Admitted, Follower, StatusMirror, Subscription
from drupe.admission.local_conversations import LocalConversations
from drupe.admission.principal import Principal
from drupe.cluster.log_writer import live_key
from drupe.cluster.router import ClusterRouter
from drupe.errors import AdmissionError, NotOwnerError
from drupe.ids import session_conversation_id
from drupe.streaming.approval_rules import Decision
from drupe.streaming.listeners.base import Listener
from drupe.streaming.listeners.sse import (
    MultiplexListener,
    SseListener,
    parse_cursor,
    seq_after,
)
from drupe.streaming.manager import StatusRecord

if TYPE_CHECKING:
    from drupe.cluster.status import ClusterStatus
    from drupe.persistence.records import ConversationRecord, MessageRecord
    from drupe.streaming.contracts import StatusObserver

__all__ = ["ClusterConversations"]


class ClusterConversations:
    def __init__(
        self,
        local: LocalConversations,
        chat: ClusterRouter,
        *,
        grace_period: float,
        status: ClusterStatus | None = None,
    ) -> None:
        self.status_feed = status
        self.local = local
        self.chat = chat
        self.node = chat.node
        self.grace_period = grace_period

    # --- submit ----------------------------------------------------------------------------------

    async def submit(
        self,
        caller: Principal,
        request: Submit | Regenerate,
        *,
        listener: Follower | None = None,
        subscribers: Sequence[Listener] = (),
    ) -> Admitted:
        await self.local.admit_target(caller, request)
        conversation_id = request.conversation_id
        if subscribers:
            manager = self.local.manager
            return Admitted(
                await self._here(request, subscribers),
                detach_listener=lambda listener_id: manager.detach(conversation_id, listener_id),
            )
        result = await self.chat.dispatch(request, caller)
        admitted = Admitted(result)
        if listener is None:
            return admitted
        follower = self.chat.follower(conversation_id, listener)
        admitted.subscription.add(follower.close)
        if result.mode == "started" and result.turn_id is not None and result.execution_ids:
            listener.follow(result.turn_id, result.execution_ids[0])
            await follower.follow_turn(result.turn_id)
        elif result.steer in ("drop", "queue-and-hold"):
            pass  # the running turn will not answer it: the caller says so
        else:
            listener.follow_next_turn(result.turn_id)
            await follower.follow_next(result.turn_id)
        return admitted

    async def _here(self, request: Submit | Regenerate, subscribers: Sequence[Listener]) -> Any:
        conversation_id = request.conversation_id
        holder = await self.node.lease.holder(conversation_id)
        if holder is not None and holder.node_id != self.node.node_id:
            raise AdmissionError("busy", f"conversation {conversation_id!r} is answering elsewhere")
        try:
            return await self.chat.dispatch_here(request, subscribers)
        except NotOwnerError as err:
            raise AdmissionError("busy", str(err)) from err

    # --- subscriptions -------------------------------------------------------------------------

    async def resume(
        self, caller: Principal, conversation_id: str, listener: SseListener, cursor: str | None
    ) -> Subscription | None:
        await self.local.access.check(caller, conversation_id, "read")
        latest = await self.chat.latest_turn(conversation_id)
        if latest is None:
            await self.local.known(caller, conversation_id, "read")
            return None
        turn_id, _announced_ms = latest
        after = seq_after(cursor, turn_id)
        parsed = parse_cursor(cursor)
        log = self.node.log
        if parsed is not None and after is None:
            # A cursor of an earlier turn whose answer was lost and is being answered again
            # (``on_owner_loss = "retry"``): resume there; the follower moves on to the new attempt.
            earlier = await log.tail(log.key(conversation_id, parsed[0]))
            if any(e.retried_as is not None for e in earlier):
                turn_id, after = parsed
        key = log.key(conversation_id, turn_id)
        # The newest entries say whether the turn ended (its terminals are the last entries).
        entries = await log.tail(key)
        if not entries and not await self._announced_live(conversation_id, key):
            return None
        ended = [e for e in entries if e.terminal is not None and e.done]
        grace_ms = self.grace_period * 1000
        if ended and int(ended[-1].cursor.split("-")[0]) + grace_ms < time.time() * 1000:
            return None  # ended, and its grace period is over
        listener.follow_next_turn(None)  # the first execution that speaks in this turn
        follower = self.chat.follower(conversation_id, listener)
        await follower.follow_turn(turn_id, after=after)
        return Subscription([follower.close])

    async def _announced_live(self, conversation_id: str, key: str) -> bool:
        """Whether the live hash names ``key``: announced at admission, nothing written yet."""
        raw: Any = await self.node.redis.hget(live_key(self.node.prefix), conversation_id)
        if raw is None:
            return False
        info = orjson.loads(raw)
        return isinstance(info, dict) and info.get("key") == key

    async def watch(
        self,
        caller: Principal,
        conversation_id: str,
        listener: MultiplexListener,
        cursor: str | None,
        *,
        mirror: StatusMirror | None = None,
    ) -> Subscription:
        await self.local.known(caller, conversation_id, "read")
        subscription = self.local.watch_here(
            conversation_id, listener, cursor, chunks=False, mirror=mirror
        )
        try:
            follower = self.chat.follower(conversation_id, listener)
            subscription.add(follower.close)
            latest = await self.chat.latest_turn(conversation_id)
            if latest is not None:
                after = seq_after(cursor, latest[0])
                await follower.follow_turn(latest[0], after=after)
            await follower.follow_next(latest[0] if latest is not None else None)
        except BaseException:
            subscription.close()
            raise
        return subscription

    def status(self, conversation_id: str) -> StatusRecord | None:
        return self.local.status(conversation_id)

    def is_live(self, conversation_id: str) -> bool:
        return self.local.is_live(conversation_id)

    async def follow_turns(
        self, caller: Principal, conversation_id: str, listener: Listener
    ) -> Subscription:
        await self.local.access.check(caller, conversation_id, "read")
        follower = self.chat.follower(conversation_id, listener)  # type: ignore[arg-type]
        await follower.follow_next(None)  # every turn from now on
        return Subscription([follower.close])

    # --- commands --------------------------------------------------------------------------

    async def stop(
        self, caller: Principal, conversation_id: str, *, reason: str = "user-stop"
    ) -> bool:
        await self.local.access.check(caller, conversation_id, "write")
        if not self.local.manager.is_live(conversation_id):
            await self.local.known(caller, conversation_id, "write")
        return await self.chat.stop(conversation_id, reason=reason, caller=caller)

    async def close_session(self, caller: Principal, session_id: str) -> None:
        conversation_id = session_conversation_id(session_id)
        await self.local.access.check(caller, conversation_id, "write")
        await self.chat.stop(conversation_id, caller=caller)  # the owner stops it, wherever
        await self.local.close_session_here(session_id)

    async def approve(
        self,
        caller: Principal,
        conversation_id: str,
        decisions: Sequence[Decision],
        *,
        subscribers: Sequence[Listener] = (),
        after_settle: bool = False,
    ) -> ApprovalOutcome:
        # Subscribers follow the continuation from the log (``follow_turns``), on any node.
        await self.local.known(caller, conversation_id, "write")
        return await self.chat.approvals(conversation_id, list(decisions), caller)

    async def delete(self, caller: Principal, conversation_id: str) -> None:
        await self.local.known(caller, conversation_id, "delete")
        await self.chat.delete(conversation_id, caller)
        self.local.manager.forget(conversation_id)

    async def get(self, caller: Principal, conversation_id: str) -> ConversationRecord | None:
        return await self.local.get(caller, conversation_id)

    async def check(self, caller: Principal, conversation_id: str, action: Action) -> None:
        await self.local.check(caller, conversation_id, action)

    async def list_for(
        self, caller: Principal, *, limit: int, before: str | None = None
    ) -> list[ConversationRecord]:
        return await self.local.list_for(caller, limit=limit, before=before)

    async def create(self, caller: Principal, *, title: str | None) -> ConversationRecord:
        return await self.local.create(caller, title=title)

    async def rename(
        self, caller: Principal, conversation_id: str, title: str | None
    ) -> ConversationRecord | None:
        return await self.local.rename(caller, conversation_id, title)

    async def messages(self, caller: Principal, conversation_id: str) -> list[MessageRecord]:
        return await self.local.messages(caller, conversation_id)

    def add_remote_observer(self, observer: StatusObserver) -> Callable[[], None]:
        if self.status_feed is None:
            return lambda: None
        return self.status_feed.add_observer(observer)

    def describe(self) -> dict[str, Any]:
        return {"mode": "cluster", "id": self.node.node_id}
