"""``LocalConversations``: the ``Conversations`` port in one process.

Contract (``drupe.admission.conversations`` states the port):

* ``submit``: asks the access policy (``write``; a plain submit to an unknown id creates the
  conversation, except ``agent-session:`` ids, which their own provider validates), then admits
  through the dispatcher with the listener and the subscribers attached. The listener follows
  the turn's first execution; after a steer it follows the next turn (the continuation that
  answers it); a steer the running turn will not answer (``drop``, ``queue-and-hold``) leaves
  it unfollowed for the caller to end. When the stream was already evicted, the listener is
  attached to the conversation's next stream as soon as it starts.
* ``resume``: the live execution from its ``start`` (compact replay) or exactly after the
  cursor of the same turn; an answer that ended within the grace period (or waits for an
  approval) is replayed with its end; None when nothing is left. Replay and registration are
  one synchronous call: nothing lost, nothing doubled.
* ``watch``: status changes, and every stream of the conversation attached as it starts.
* ``follow_turns``: the listener is attached to every turn admitted through this port for
  the conversation (and so carried into its continuations).
* ``stop``, ``close_session``, ``approve``: ``drupe.admission.conversation_commands`` (the one
  copy of stop and approvals).
* ``delete``: stop and drain the live answer (its partial persisted), delete the rows, forget
  the stream's status.

The ``*_here`` methods do the work without asking the policy: the cluster implementation
calls them on the owner node after the caller's node asked it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from drupe.admission.access import AccessPolicy, Action, AllowAll
from drupe.admission.approval_service import ApprovalOutcome, ApprovalService
from drupe.admission.base import DispatchRequest, Regenerate, Submit
from drupe.admission.conversation_commands import answer_approvals, close_session, stop_conversation
from drupe.admission.conversations import Admitted, Follower, StatusMirror, Subscription
from drupe.admission.dispatch import Dispatcher
from drupe.admission.ephemeral import EphemeralStore
from drupe.admission.principal import Principal
from drupe.admission.stream_subscriptions import attach_to_next_stream, watch_stream
from drupe.errors import UnknownConversationError, ValidationError
from drupe.ids import is_session_conversation, session_conversation_id
from drupe.streaming.approval_rules import Decision
from drupe.streaming.contracts import StatusObserver
from drupe.streaming.listeners.base import Listener
from drupe.streaming.listeners.sse import MultiplexListener, SseListener, seq_after
from drupe.streaming.manager import StatusRecord, StreamManager

if TYPE_CHECKING:
    from drupe.persistence.conversations import ConversationStore
    from drupe.persistence.messages import MessageStore
    from drupe.persistence.records import ConversationRecord, MessageRecord
    from drupe.sessions.host import AgentSessionHost

__all__ = ["MAX_CONVERSATION_ID", "LocalConversations"]

MAX_CONVERSATION_ID = 256


class LocalConversations:
    def __init__(
        self,
        *,
        manager: StreamManager,
        dispatcher: Dispatcher,
        approvals: ApprovalService,
        conversations: ConversationStore,
        messages: MessageStore,
        ephemeral: EphemeralStore,
        sessions: AgentSessionHost | None,
        access: AccessPolicy | None = None,
    ) -> None:
        self.manager = manager
        self.dispatcher = dispatcher
        self.approvals = approvals
        self.conversations = conversations
        self.messages_store = messages
        self.ephemeral = ephemeral
        self.sessions = sessions
        self.access: AccessPolicy = access or AllowAll()
        self._turn_followers: dict[str, list[Listener]] = {}

    # --- access --------------------------------------------------------------------------------

    async def known(self, caller: Principal, conversation_id: str, action: Action) -> bool:
        """Ask the policy, then raise ``UnknownConversationError`` unless the conversation
        exists; True when it is ephemeral."""
        await self.access.check(caller, conversation_id, action)
        if self.ephemeral.get(conversation_id) is not None:
            return True
        if (
            len(conversation_id) > MAX_CONVERSATION_ID
            or await self.conversations.get(conversation_id) is None
        ):
            raise UnknownConversationError(conversation_id)
        return False

    async def admit_target(self, caller: Principal, request: Submit | Regenerate) -> None:
        """Ask the policy for a submit's target; a plain submit to an unknown id creates it."""
        conversation_id = request.conversation_id
        if self.ephemeral.get(conversation_id) is not None:
            await self.access.check(caller, conversation_id, "write")
            if isinstance(request, Regenerate):
                raise ValidationError("an ephemeral conversation cannot regenerate an answer")
            return
        if is_session_conversation(conversation_id):
            await self.access.check(caller, conversation_id, "write")
            return  # its provider validates the session
        if len(conversation_id) > MAX_CONVERSATION_ID:
            raise ValidationError(f"a conversation id has at most {MAX_CONVERSATION_ID} characters")
        if await self.conversations.get(conversation_id) is None:
            if isinstance(request, Regenerate):
                raise UnknownConversationError(conversation_id)
            await self.conversations.create_absent(
                conversation_id, owner_id=self.access.owner_for_new(caller)
            )
            # Created just now, or by another caller in between: the policy decides.
            await self.access.check(caller, conversation_id, "write")
            return
        await self.access.check(caller, conversation_id, "write")

    # --- submit ----------------------------------------------------------------------------------

    async def submit(
        self,
        caller: Principal,
        request: Submit | Regenerate,
        *,
        listener: Follower | None = None,
        subscribers: Sequence[Listener] = (),
    ) -> Admitted:
        await self.admit_target(caller, request)
        return await self.submit_here(request, listener=listener, subscribers=subscribers)

    async def submit_here(
        self,
        request: DispatchRequest,
        *,
        listener: Follower | None = None,
        subscribers: Sequence[Listener] = (),
    ) -> Admitted:
        conversation_id = request.conversation_id
        attached: list[Listener] = [*subscribers, *self._turn_followers.get(conversation_id, ())]
        if listener is not None:
            attached.append(listener)  # type: ignore[arg-type]  # every Follower here is one
        result = await self.dispatcher.dispatch(request, attached)
        admitted = Admitted(
            result,
            detach_listener=lambda listener_id: self.manager.detach(conversation_id, listener_id),
        )
        if listener is None:
            return admitted
        admitted.subscription.add(
            lambda: self.manager.detach(conversation_id, listener.listener_id)
        )
        if result.mode == "started" and result.turn_id is not None and result.execution_ids:
            listener.follow(result.turn_id, result.execution_ids[0])
        elif result.steer in ("drop", "queue-and-hold"):
            pass  # the running turn will not answer it: the caller says so
        elif result.turn_id is None:
            # No stream to ride on (it was already evicted): follow the next turn that starts.
            listener.follow_next_turn(None)
            admitted.subscription.add(
                attach_to_next_stream(self.manager, conversation_id, listener)
            )
        else:
            listener.follow_next_turn(result.turn_id)
        return admitted

    # --- subscriptions ---------------------------------------------------------------------------

    async def resume(
        self, caller: Principal, conversation_id: str, listener: SseListener, cursor: str | None
    ) -> Subscription | None:
        await self.access.check(caller, conversation_id, "read")
        stream = self.manager.get(conversation_id)
        if stream is None:
            await self.known(caller, conversation_id, "read")
            return None
        after = seq_after(cursor, stream.turn_id)
        if not stream.is_live:
            # Ended within the grace period, or waiting for a tool approval: replay the finished
            # message (exactly after the cursor when one is given) and its end.
            first = next(iter(stream.executions))
            listener.follow(stream.turn_id, first)
            if not await self.manager.subscriptions.replay_ended(
                conversation_id, listener, execution_id=first, after=after
            ):
                return None
            return Subscription()
        execution = next((e for e in stream.executions.values() if e.status == "streaming"), None)
        if execution is None:
            return None
        listener.follow(stream.turn_id, execution.execution_id)
        self.manager.attach(
            conversation_id, listener, after=after, execution_ids=[execution.execution_id]
        )
        return Subscription([lambda: self.manager.detach(conversation_id, listener.listener_id)])

    async def watch(
        self,
        caller: Principal,
        conversation_id: str,
        listener: MultiplexListener,
        cursor: str | None,
        *,
        mirror: StatusMirror | None = None,
    ) -> Subscription:
        await self.known(caller, conversation_id, "read")
        return self.watch_here(conversation_id, listener, cursor, chunks=True, mirror=mirror)

    def watch_here(
        self,
        conversation_id: str,
        listener: MultiplexListener,
        cursor: str | None,
        *,
        chunks: bool,
        mirror: StatusMirror | None = None,
    ) -> Subscription:
        """Status changes (this node's, and the mirror's remote ones), the current status;
        with ``chunks``, this node's streams attached too (``watch_stream``)."""
        return watch_stream(
            self.manager, conversation_id, listener, cursor, chunks=chunks, mirror=mirror
        )

    def status(self, conversation_id: str) -> StatusRecord | None:
        """This node's latest status record of the conversation."""
        return self.manager.status(conversation_id)

    def is_live(self, conversation_id: str) -> bool:
        return self.manager.is_live(conversation_id)

    async def follow_turns(
        self, caller: Principal, conversation_id: str, listener: Listener
    ) -> Subscription:
        await self.access.check(caller, conversation_id, "read")
        followers = self._turn_followers.setdefault(conversation_id, [])
        followers.append(listener)

        def remove() -> None:
            if listener in followers:
                followers.remove(listener)
            if not followers:
                self._turn_followers.pop(conversation_id, None)

        return Subscription([remove])

    # --- commands ------------------------------------------------------------------------------

    async def stop(
        self, caller: Principal, conversation_id: str, *, reason: str = "user-stop"
    ) -> bool:
        await self.access.check(caller, conversation_id, "write")
        if not self.manager.is_live(conversation_id):
            await self.known(caller, conversation_id, "write")
        return await self.stop_here(conversation_id, reason=reason)

    async def stop_here(self, conversation_id: str, *, reason: str = "user-stop") -> bool:
        return await stop_conversation(self.manager, self.sessions, conversation_id, reason)

    async def close_session(self, caller: Principal, session_id: str) -> None:
        await self.access.check(caller, session_conversation_id(session_id), "write")
        await self.close_session_here(session_id)

    async def close_session_here(self, session_id: str) -> None:
        await close_session(self.manager, self.sessions, session_id)

    async def approve(
        self,
        caller: Principal,
        conversation_id: str,
        decisions: Sequence[Decision],
        *,
        subscribers: Sequence[Listener] = (),
        after_settle: bool = False,
    ) -> ApprovalOutcome:
        await self.known(caller, conversation_id, "write")
        return await self.approve_here(
            conversation_id, decisions, subscribers=subscribers, after_settle=after_settle
        )

    async def approve_here(
        self,
        conversation_id: str,
        decisions: Sequence[Decision],
        *,
        subscribers: Sequence[Listener] = (),
        after_settle: bool = False,
    ) -> ApprovalOutcome:
        if after_settle:
            await self.manager.wait_settled(conversation_id)
        followers = [*subscribers, *self._turn_followers.get(conversation_id, ())]
        return await answer_approvals(
            self.approvals, self.sessions, conversation_id, decisions, followers
        )

    async def delete(self, caller: Principal, conversation_id: str) -> None:
        await self.known(caller, conversation_id, "delete")
        await self.delete_here(conversation_id)

    async def delete_here(self, conversation_id: str) -> None:
        await self.manager.abort_and_drain(conversation_id, "conversation-deleted")
        if self.ephemeral.get(conversation_id) is not None:
            self.ephemeral.delete(conversation_id)
        else:
            await self.conversations.delete(conversation_id)
        self.manager.forget(conversation_id)

    async def check(self, caller: Principal, conversation_id: str, action: Action) -> None:
        await self.known(caller, conversation_id, action)

    async def get(self, caller: Principal, conversation_id: str) -> ConversationRecord | None:
        if await self.known(caller, conversation_id, "read"):
            return None
        return await self.conversations.get(conversation_id)

    async def list_for(
        self, caller: Principal, *, limit: int, before: str | None = None
    ) -> list[ConversationRecord]:
        return await self.conversations.list(
            limit=limit, before=before, visible_to=self.access.list_filter(caller)
        )

    async def create(self, caller: Principal, *, title: str | None) -> ConversationRecord:
        return await self.conversations.create(
            title=title, owner_id=self.access.owner_for_new(caller)
        )

    async def rename(
        self, caller: Principal, conversation_id: str, title: str | None
    ) -> ConversationRecord | None:
        ephemeral = self.ephemeral.get(conversation_id)
        await self.access.check(caller, conversation_id, "write")
        if ephemeral is not None:
            ephemeral.title = title
            return None
        if len(conversation_id) > MAX_CONVERSATION_ID:
            raise UnknownConversationError(conversation_id)
        return await self.conversations.rename(conversation_id, title)

    async def messages(self, caller: Principal, conversation_id: str) -> list[MessageRecord]:
        await self.known(caller, conversation_id, "read")
        return await self.messages_store.list_for_conversation(conversation_id)

    def add_remote_observer(self, observer: StatusObserver) -> Callable[[], None]:
        return lambda: None  # one process: no other node

    def describe(self) -> dict[str, Any]:
        return {"mode": "single", "id": None}
