"""``Conversations``: the one port through which every surface acts on a conversation.

The browser API, the LLM gateway, the IM channels, scheduled tasks and the CLI submit, resume,
watch, stop, approve and delete through this port and nothing else; none of them imports the
stream manager or the cluster. Two implementations:

* ``LocalConversations`` (``drupe.admission.local_conversations``): one process; the dispatcher
  admits, the stream manager streams.
* ``ClusterConversations`` (``drupe.cluster.cluster_conversations``): every node; a command runs
  on the conversation's owner node (routed through Redis), subscribers on every node follow the
  owner's chunk log, and a node that finds nothing live asks the log before it says so.

Every call carries its caller (a ``Principal``) and asks the ``AccessPolicy`` first: a
conversation the caller may not see is ``UnknownConversationError`` (404), exactly as one that
does not exist.

Followers: ``submit(listener=...)`` and ``resume`` take a ``Follower`` (an SSE response's
listener, a gateway prompt listener): it follows ONE answer (the turn's first execution, or a
steer's continuation) to its end. ``watch`` takes the conversation's multiplexed event
listener; ``follow_turns`` gives a chat every answer of the conversation from now on.
``subscribers`` of ``submit`` are attached to the turn where it runs, which is then always
this node (a scheduled task's sentinel and deliveries): another node's turn is ``busy``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from drupe.admission.access import Action
from drupe.admission.approval_service import ApprovalOutcome
from drupe.admission.base import Regenerate, Submit
from drupe.admission.dispatch import DispatchResult
from drupe.admission.principal import Principal
from drupe.streaming.approval_rules import Decision
from drupe.streaming.listeners.base import Listener, StreamEvent, TerminalResult

if TYPE_CHECKING:
    from drupe.persistence.records import ConversationRecord, MessageRecord
    from drupe.streaming.contracts import StatusObserver
    from drupe.streaming.listeners.sse import MultiplexListener, SseListener
    from drupe.streaming.manager import StatusRecord

__all__ = [
    "Admitted",
    "Conversations",
    "Follower",
    "StatusMirror",
    "Subscription",
]


class StatusMirror(Protocol):
    """Where an event stream's statuses come from besides this node's manager: the HTTP edge's
    status board (in cluster mode it mirrors every node's statuses)."""

    def record(self, conversation_id: str) -> StatusRecord | None: ...

    def add_remote_observer(self, observer: StatusObserver) -> Callable[[], None]: ...


class Follower(Protocol):
    """A listener that follows one answer: in process, or fed from the cluster's chunk log."""

    listener_id: str

    @property
    def target(self) -> tuple[str, str] | None: ...

    def on_chunk(self, event: StreamEvent) -> None: ...

    def end_with(self, result: TerminalResult) -> None: ...

    def follow(self, turn_id: str, execution_id: str) -> None: ...

    def follow_next_turn(self, after_turn_id: str | None) -> None: ...

    def is_alive(self) -> bool: ...


@dataclass(slots=True)
class Subscription:
    """A listener's hold on a conversation; ``close()`` (idempotent) lets go of it. Closing
    never stops an answer."""

    _undo: list[Callable[[], object]] = field(default_factory=list)

    def add(self, undo: Callable[[], object]) -> None:
        self._undo.append(undo)

    def close(self) -> None:
        undo, self._undo = self._undo, []
        for step in undo:
            step()


@dataclass(slots=True)
class Admitted:
    """An admitted submit: the dispatcher's result and the follower's subscription."""

    result: DispatchResult
    subscription: Subscription = field(default_factory=Subscription)
    detach_listener: Callable[[str], object] = lambda listener_id: None

    def close(self) -> None:
        self.subscription.close()

    def detach(self, listener: Listener) -> None:
        """Let one of the submit's subscribers go (it gets nothing more); never stops the turn."""
        self.detach_listener(listener.listener_id)


class Conversations(Protocol):
    async def submit(
        self,
        caller: Principal,
        request: Submit | Regenerate,
        *,
        listener: Follower | None = None,
        subscribers: Sequence[Listener] = (),
    ) -> Admitted:
        """Admit a turn (creating an unknown conversation for a plain submit); ``listener``
        follows its answer, ``subscribers`` are attached where it runs (this node)."""
        ...

    async def resume(
        self, caller: Principal, conversation_id: str, listener: SseListener, cursor: str | None
    ) -> Subscription | None:
        """Follow the live (or just ended) answer from its start, or exactly after ``cursor``
        (``<turn>/<seq>``); None when nothing is live and the grace period is over."""
        ...

    async def watch(
        self,
        caller: Principal,
        conversation_id: str,
        listener: MultiplexListener,
        cursor: str | None,
        *,
        mirror: StatusMirror | None = None,
    ) -> Subscription:
        """The conversation's status (first the current one: the mirror's, else this node's)
        and its changes, and every execution's chunks (exactly after ``cursor`` in its turn)."""
        ...

    def status(self, conversation_id: str) -> StatusRecord | None:
        """This node's latest status record of the conversation (None: never seen)."""
        ...

    def is_live(self, conversation_id: str) -> bool:
        """Whether an answer of the conversation streams on this node now."""
        ...

    async def follow_turns(
        self, caller: Principal, conversation_id: str, listener: Listener
    ) -> Subscription:
        """Give ``listener`` every answer of the conversation from now on (an IM chat)."""
        ...

    async def stop(
        self, caller: Principal, conversation_id: str, *, reason: str = "user-stop"
    ) -> bool:
        """Stop the live answer (an agent session's queue and turn too); returns after the
        partial answer is persisted, with whether anything was stopped. ``reason`` is the
        abort's reason its terminal carries."""
        ...

    async def close_session(self, caller: Principal, session_id: str) -> None:
        """Stop an agent session's turn, drop its queue and its runtime connection."""
        ...

    async def approve(
        self,
        caller: Principal,
        conversation_id: str,
        decisions: Sequence[Decision],
        *,
        subscribers: Sequence[Listener] = (),
        after_settle: bool = False,
    ) -> ApprovalOutcome:
        """Answer pending tool approvals; an answered chat turn continues in the same
        message (``subscribers`` get the continuation). ``after_settle``: wait for the turn
        that asked to finish settling first (an IM button can be pressed that early)."""
        ...

    async def delete(self, caller: Principal, conversation_id: str) -> None:
        """Stop the live answer (its partial persisted), then delete the conversation."""
        ...

    async def get(self, caller: Principal, conversation_id: str) -> ConversationRecord | None:
        """The stored conversation (None for an ephemeral one); raises when unknown."""
        ...

    async def check(self, caller: Principal, conversation_id: str, action: Action) -> None:
        """Raise ``UnknownConversationError`` unless the conversation exists and the caller may
        ``action`` it (for the routes that act on a conversation's rows directly)."""
        ...

    async def list_for(
        self, caller: Principal, *, limit: int, before: str | None = None
    ) -> list[ConversationRecord]:
        """The conversations the caller may see, newest-updated first, after cursor ``before``."""
        ...

    async def create(self, caller: Principal, *, title: str | None) -> ConversationRecord:
        """A new stored conversation owned by the caller."""
        ...

    async def rename(
        self, caller: Principal, conversation_id: str, title: str | None
    ) -> ConversationRecord | None:
        """Set the title (None for an ephemeral conversation: its title is set in memory)."""
        ...

    async def messages(self, caller: Principal, conversation_id: str) -> list[MessageRecord]:
        """Every stored message of the conversation's tree, oldest first."""
        ...

    def add_remote_observer(self, observer: StatusObserver) -> Callable[[], None]:
        """Call ``observer`` on every status change of another node's streams (none in one
        process); returns the remover."""
        ...

    def describe(self) -> dict[str, Any]:
        """This node: ``{"mode": "single" | "cluster", "id": node id | None}``."""
        ...
